"""TensorBoard scalars for a run folder: its ``tb/`` is then a complete TensorBoard log dir.

Written once at the end of a launched script from ``steps.jsonl`` (not inside the training loop, so the
script's step times are not disturbed): ``step/wall_ms`` and ``step/loss`` per rank, ``step/samples_per_s``
when the batch size was seen.
"""

from __future__ import annotations

from pathlib import Path

from profilers.store_io import read_jsonl, steps_frame


def write_scalars(run_dir: Path) -> int:
    """Write one scalar event per step and measure; returns how many steps were written."""
    from torch.utils.tensorboard import SummaryWriter

    steps = steps_frame(read_jsonl(run_dir / "steps.jsonl"))
    if steps.empty:
        return 0
    for rank, rows in steps.groupby("rank"):
        writer = SummaryWriter(log_dir=str(run_dir / "tb"), filename_suffix=f".rank{rank}")
        try:
            for row in rows.itertuples(index=False):
                writer.add_scalar("step/wall_ms", float(row.wall_ms), int(row.step))
                if row.loss == row.loss:  # not NaN
                    writer.add_scalar("step/loss", float(row.loss), int(row.step))
                if row.samples == row.samples and row.wall_ms > 0:
                    writer.add_scalar("step/samples_per_s", float(row.samples) / float(row.wall_ms) * 1000.0,
                                      int(row.step))
        finally:
            writer.close()
    return int(steps["step"].nunique())
