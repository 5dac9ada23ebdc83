"""TensorBoard scalars of a run: one set of names, whoever records them, so every run's ``tb/`` reads the same.

The launcher writes them once at the end of every run from ``steps.jsonl`` (:func:`write_scalars`), so the
script's step times are not disturbed. A step gives ``step/wall_ms``, ``step/loss`` when the loss is known and
``step/samples_per_s`` when the batch size is known — the names of ``steps.jsonl``'s own fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profilers.store.files import steps_frame
from profilers.run.step_records import step_rows

WALL_MS, LOSS, SAMPLES_PER_S = "step/wall_ms", "step/loss", "step/samples_per_s"
STEP_SCALARS = (WALL_MS, LOSS, SAMPLES_PER_S)


def add_step_scalars(
    writer: Any, step: int, wall_ms: float, loss: float | None, samples: int | None
) -> None:
    """One step's scalars into a ``SummaryWriter``; an unknown loss or sample count is left out, not zero."""
    writer.add_scalar(WALL_MS, float(wall_ms), int(step))
    if loss is not None:
        writer.add_scalar(LOSS, float(loss), int(step))
    if samples is not None and wall_ms > 0:
        writer.add_scalar(SAMPLES_PER_S, float(samples) / float(wall_ms) * 1000.0, int(step))


def write_scalars(run_dir: Path) -> int:
    """Write one scalar event per step and measure; returns how many steps were written."""
    from torch.utils.tensorboard import SummaryWriter

    steps = steps_frame(step_rows(run_dir))
    if steps.empty:
        return 0
    for rank, rows in steps.groupby("rank"):
        writer = SummaryWriter(log_dir=str(run_dir / "tb"), filename_suffix=f".rank{rank}")
        try:
            for step, wall_ms, loss, samples in zip(
                rows["step"].tolist(),
                rows["wall_ms"].tolist(),
                rows["loss"].tolist(),
                rows["samples"].tolist(),
            ):
                add_step_scalars(writer, int(step), float(wall_ms), _known(loss), _known(samples))
        finally:
            writer.close()
    return int(steps["step"].nunique())


def _known(value: Any) -> Any:
    """None for a missing cell: ``steps_frame`` turns a ``null`` loss or sample count into NaN."""
    return None if value is None or value != value else value
