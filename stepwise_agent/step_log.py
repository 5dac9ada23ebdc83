"""The watch mode's step log: every step's record written by a daemon thread, and a run folder that stays bounded
(standard library only).

The training thread only appends a tuple (:data:`Row`) to :attr:`StepLog.rows` (a deque: an append is atomic under
the GIL, no lock, no file); the writer thread drains it at least every :data:`FLUSH_S` seconds (sooner when
:meth:`StepLog.wake` says :data:`WAKE_ROWS` rows wait) and decides, row by row, oldest first:

- the first :data:`KEEP_FIRST` steps, every capture's window with :data:`AROUND` steps on each side, and the last
  :data:`AROUND` steps of the run stay **whole** rows in ``steps.jsonl`` (the fields of
  :func:`row_dict`, the same as the launch recorder's);
- every other step is **rolled up**: a summary per minute of steps, or per :data:`ROLLUP_STEPS` steps, whichever
  ends first, goes to ``steps_rollup.jsonl`` (:meth:`RollUp.summary`'s fields).

Rows not decided yet (the last :data:`AROUND`, the roll-up still open) are rewritten, whole, to
``steps_open.rank{R}.jsonl`` at every flush: a run killed with ``kill -9`` loses at most the last :data:`FLUSH_S`
seconds. A reader takes the open rows past the last step the two other files cover
(:mod:`profilers.run.step_records`). At a normal end, a crash or Ctrl-C (:meth:`StepLog.close`, from the agent's
exit path) the open rows are decided and the file goes.

So a run of a million steps keeps about ``KEEP_FIRST`` whole rows (~200 bytes each), one ~330-byte summary per
roll-up and the captures' windows: under 1 MB for a million 1-ms steps, ~480 KB a day of slower steps.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

# (step, wall_ms, loss, samples, data_ms, profiled, ended_unix_ns, memory_mb, capture n)
#: (step, wall_ms, loss, samples, data_ms, profiled, ended_ns, memory, capture[, backward_ms]): a watched step
#: carries the time inside its backward calls last (the rank watch's signal), a plain launch's row does not
Row = tuple[Any, ...]
STEPS, ROLLUPS, OPEN = (
    "steps.jsonl",
    "steps_rollup.jsonl",
    "steps_open.rank{rank}.jsonl",
)  # OPEN: one per rank
KEEP_FIRST = 2000
AROUND = 64  # more than the trigger's judged steps and the steps after a profiler the steady choice skips
ROLLUP_STEPS = 1000
ROLLUP_NS = 60 * 10**9
FLUSH_S = 0.5  # the log's thread writes twice a second: a kill -9 loses well under a second
WAKE_ROWS = 2000
MAX_PENDING = 200_000  # rows the training thread may get ahead of the writer before it waits for it


def row_dict(rank: int, row: Row) -> dict[str, Any]:
    """A whole ``steps.jsonl`` row; its time is its step's start."""
    step, wall_ms, loss, samples, data_ms, profiled, ended_ns, memory, capture = row[:9]
    out = {
        "rank": rank,
        "step": step,
        "wall_ms": round(wall_ms, 4),
        "loss": loss,
        "samples": samples,
        "data_ms": None if data_ms is None else round(data_ms, 4),
        "profiled": profiled,
        "t_unix_ns": ended_ns - int(wall_ms * 1e6),
        "rss_mb": None if memory is None else round(memory, 1),
    }
    if len(row) > 9:
        out["backward_ms"] = None if row[9] is None else round(row[9], 4)
    return {**out, **({"capture": capture} if capture is not None else {})}


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


class RollUp:
    """The steps of one roll-up, kept until it closes (at most :data:`ROLLUP_STEPS` rows)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def full(self, row: Row) -> bool:
        """Whether ``row`` belongs to the next roll-up (this one has its steps, or its minute is over)."""
        return bool(self.rows) and (
            len(self.rows) >= ROLLUP_STEPS
            or row[6] - int(row[1] * 1e6) - self._start_ns() >= ROLLUP_NS
        )

    def _start_ns(self) -> int:
        return self.rows[0][6] - int(self.rows[0][1] * 1e6)

    def summary(self, rank: int) -> dict[str, Any]:
        """``steps_rollup.jsonl``'s fields: rank, first/last step, steps, start and end time, the wall's median,
        p10, p90 and sum (ms), the batch-drawing share and sum, loss last/mean, samples, memory max, and the median
        work (wall minus backward; None unless every step measured its backward)."""
        walls = sorted(r[1] for r in self.rows)
        data = [r[4] for r in self.rows if r[4] is not None]
        losses = [r[2] for r in self.rows if r[2] is not None]
        memory = [r[7] for r in self.rows if r[7] is not None]
        # a step's own work (wall minus its time inside backward, where DDP's all-reduce waits for the slowest
        # rank): the ranks' reduction judges the straggler on it, over the rolled-up steps too
        work = sorted(max(r[1] - r[9], 0.0) for r in self.rows if len(r) > 9 and r[9] is not None)
        wall_sum = sum(walls)
        data_ok = len(data) == len(self.rows)
        return {
            "rank": rank,
            "first_step": self.rows[0][0],
            "last_step": self.rows[-1][0],
            "steps": len(self.rows),
            "t_unix_ns": self._start_ns(),
            "t_end_unix_ns": self.rows[-1][6],
            "wall_ms_median": round(statistics.median(walls), 4),
            "wall_ms_p10": round(_quantile(walls, 0.1), 4),
            "wall_ms_p90": round(_quantile(walls, 0.9), 4),
            "wall_ms_sum": round(wall_sum, 3),
            "data_ms_sum": round(sum(data), 3) if data_ok else None,
            "data_share": round(sum(data) / wall_sum, 4) if data_ok and wall_sum > 0 else None,
            "loss_last": losses[-1] if losses else None,
            "loss_mean": statistics.fmean(losses) if losses else None,
            "samples": sum(r[3] or 0 for r in self.rows) if any(r[3] for r in self.rows) else None,
            "rss_mb_max": round(max(memory), 1) if memory else None,
            "work_ms_median": round(statistics.median(work), 4)
            if len(work) == len(self.rows)
            else None,
        }


class StepLog:
    """The writer of a watched rank's step records (see the module docs)."""

    def __init__(self, run_dir: Path, rank: int, tick: Callable[[], None] | None = None) -> None:
        self.run_dir, self.rank, self.tick = (
            run_dir,
            rank,
            tick,
        )  # tick: the owner's work once a flush, here
        self.rows: deque[Row] = deque()
        self._tail: deque[Row] = deque()  # the last AROUND rows, not decided yet
        self._rollup = RollUp()
        self._keep: list[
            list[int]
        ] = []  # [first, last] whole-step ranges (captures with AROUND each side)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = self._closed = False
        self._open_at = 0.0  # when the open file was last written (time.monotonic)
        self._steps_fh = open(run_dir / STEPS, "a", encoding="utf-8")
        self._rollup_fh = open(run_dir / ROLLUPS, "a", encoding="utf-8")
        self.thread = threading.Thread(target=self._run, name="stepwise-step-log", daemon=True)
        self.thread.start()

    def wake(self) -> None:
        """Called by the training thread when :data:`WAKE_ROWS` rows wait; past :data:`MAX_PENDING` it waits."""
        self._wake.set()
        while len(self.rows) > MAX_PENDING and self.thread.is_alive():
            threading.Event().wait(0.01)

    def _run(self) -> None:
        while not self._stop:
            self._wake.wait(FLUSH_S)
            self._wake.clear()
            # a wake for many rows rewrites the open file only once its last copy is half a flush old
            self.flush(write_open=time.monotonic() - self._open_at >= FLUSH_S / 2)
            if self.tick is not None and not self._stop:
                try:
                    self.tick()
                except Exception:  # noqa: BLE001 - the progress file is a courtesy; the records go on
                    pass

    def flush(self, write_open: bool = True) -> None:
        """Decide the waiting rows and write them (the writer thread's work; also at close)."""
        with self._lock:
            decided: list[str] = []
            rolled: list[str] = []
            while self.rows:
                row = self.rows.popleft()
                if (
                    row[8] is not None
                ):  # a capture's step: it and the AROUND steps on each side stay whole
                    if self._keep and self._keep[-1][1] >= row[0] - AROUND:
                        self._keep[-1][1] = row[0] + AROUND
                    else:
                        self._keep.append([row[0] - AROUND, row[0] + AROUND])
                self._tail.append(row)
                if len(self._tail) > AROUND:
                    self._decide(self._tail.popleft(), decided, rolled)
            self._write(decided, rolled)
            if write_open:
                self._write_open()

    def _decide(self, row: Row, decided: list[str], rolled: list[str]) -> None:
        while self._keep and self._keep[0][1] < row[0]:
            self._keep.pop(0)
        whole = row[0] < KEEP_FIRST or bool(self._keep and self._keep[0][0] <= row[0])
        if self._rollup.rows and (whole or self._rollup.full(row)):
            rolled.append(json.dumps(self._rollup.summary(self.rank)) + "\n")
            self._rollup = RollUp()
        if whole:
            decided.append(json.dumps(row_dict(self.rank, row)) + "\n")
        else:
            self._rollup.rows.append(row)

    def _write(self, decided: list[str], rolled: list[str]) -> None:
        if rolled:  # the roll-ups before the whole rows: a reader's "last covered step" is never ahead of them
            self._rollup_fh.write("".join(rolled))
            self._rollup_fh.flush()
        if decided:
            self._steps_fh.write("".join(decided))
            self._steps_fh.flush()

    def _write_open(self) -> None:
        rows = [*self._rollup.rows, *self._tail]
        tmp = self.run_dir / f".{OPEN.format(rank=self.rank)}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write("".join(json.dumps(row_dict(self.rank, r)) + "\n" for r in rows))
        os.replace(tmp, self.run_dir / OPEN.format(rank=self.rank))
        self._open_at = time.monotonic()

    def close(self) -> None:
        """Stop the writer, write every row: the last AROUND whole, the open roll-up summed up; no open file."""
        if self._closed:
            return
        self._closed = self._stop = True
        self._wake.set()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout=30)
        self.flush(write_open=False)
        with self._lock:
            rolled = (
                [json.dumps(self._rollup.summary(self.rank)) + "\n"] if self._rollup.rows else []
            )
            self._rollup = RollUp()
            decided = [json.dumps(row_dict(self.rank, r)) + "\n" for r in self._tail]
            self._tail.clear()
            self._write(decided, rolled)
            self._steps_fh.close()
            self._rollup_fh.close()
            try:
                os.unlink(self.run_dir / OPEN.format(rank=self.rank))
            except OSError:
                pass
