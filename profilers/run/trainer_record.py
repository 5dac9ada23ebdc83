"""What a run leaves on disk while it trains: ``steps.jsonl``, ``progress.json``, TensorBoard scalars, the result.

Files are written so that another process can read them at any moment: steps are flushed per line,
``progress.json`` and ``result.json`` are replaced atomically (temp file + ``os.replace``). A failure result
is written "first writer wins" (hard link, which fails if the file exists), so when one rank dies and the
others fail as a consequence, the root cause is what stays in ``result.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from profilers.run.tb_export import add_step_scalars
from stepwise_agent.steady import StepChoice, choose_steps
from profilers.run.trainer import StepRecord

STEPS_FILE, PROGRESS_FILE, RESULT_FILE = "steps.jsonl", "progress.json", "result.json"


def _temp_for(path: Path, obj: Any) -> str:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1, default=str)
    return tmp


def write_json_atomic(path: Path, obj: Any) -> None:
    """Replace ``path`` with ``obj`` as JSON; a reader sees the old or the new file, never half of one."""
    os.replace(_temp_for(path, obj), path)


def write_json_if_absent(path: Path, obj: Any) -> bool:
    """Write ``path`` only if no one has yet (atomic); True when this call wrote it."""
    tmp = _temp_for(path, obj)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def median_iqr(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    if len(values) < 2:
        return values[0], 0.0
    q = statistics.quantiles(values, n=4, method="inclusive")
    return statistics.median(values), q[2] - q[0]


class RunRecorder:
    """Per-rank step log; the ``leader`` also keeps ``progress.json`` and (if instrumented) TensorBoard scalars.

    The leader is the first rank of the run folder's node (local rank 0): rank 0 on one machine, and on every
    node of a multi-node run, whose other nodes keep run folders of their own.
    """

    def __init__(self, run_dir: Path, rank: int, total_steps: int, tensorboard: bool, leader: bool) -> None:
        self.run_dir, self.rank, self.total_steps, self.leader = run_dir, rank, total_steps, leader
        self.records: list[tuple[StepRecord, bool]] = []
        self.started = time.time()
        self._steps = (run_dir / STEPS_FILE).open("a", encoding="utf-8")
        self._tb = None
        if leader:  # a follower sees the run (and its length) before the first step ends
            write_json_atomic(run_dir / PROGRESS_FILE, {
                "step": 0, "total_steps": total_steps, "loss": None, "eta_s": None, "elapsed_s": 0.0,
                "status": "running", "updated_unix": time.time()})
        if tensorboard and leader:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(run_dir / "tb"), filename_suffix=f".rank{rank}")

    def record(self, rec: StepRecord, profiled: bool) -> None:
        self.records.append((rec, profiled))
        line = {"rank": self.rank, "step": rec.step, "wall_ms": round(rec.wall_ms, 4), "loss": rec.loss,
                "samples": rec.samples, "profiled": profiled, "t_unix_ns": rec.t_unix_ns,
                "data_ms": None if rec.data_ms is None else round(rec.data_ms, 4)}
        self._steps.write(json.dumps(line) + "\n")
        self._steps.flush()
        if not self.leader:
            return
        done = rec.step + 1
        recent = [r.wall_ms for r, _ in self.records[-10:]]
        eta = statistics.median(recent) / 1000 * (self.total_steps - done)
        write_json_atomic(self.run_dir / PROGRESS_FILE, {
            "step": done, "total_steps": self.total_steps, "loss": rec.loss, "eta_s": round(eta, 3),
            "elapsed_s": round(time.time() - self.started, 3), "status": "running", "updated_unix": time.time(),
        })
        if self._tb is not None:
            add_step_scalars(self._tb, rec.step, rec.wall_ms, rec.loss, rec.samples)

    def step_choice(self, warmup_steps: int) -> StepChoice:
        """The steady steps (:mod:`stepwise_agent.steady`): past warm-up, not profiled, not next to the profiler."""
        return choose_steps([r.step for r, _ in self.records], [p for _, p in self.records], warmup_steps)

    def step_times(self, warmup_steps: int) -> list[float]:
        """Wall times of the steps the run's one step time is the median of (see :meth:`step_choice`)."""
        choice = self.step_choice(warmup_steps)
        return [self.records[i][0].wall_ms for i in choice.positions]

    def profiled_times(self) -> list[float]:
        """Wall times of the steps the profiler collected: the profiled window's own median, shown beside."""
        return [r.wall_ms for r, p in self.records if p]

    def close(self) -> None:
        """Close the step log and flush the scalars to disk (SummaryWriter buffers up to 2 minutes)."""
        self._steps.close()
        if self._tb is not None:
            tb, self._tb = self._tb, None
            tb.close()
