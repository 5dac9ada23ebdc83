"""The agent's step recorder: times every step, drives the ``torch.profiler`` schedule and keeps the profiler's
own memory cost apart from the script's.

A ``torch.profiler`` schedule (wait W, warm-up 1, active N) advances at each step; every step's wall time (and
loss, samples, and this process's resident memory ``rss_mb``) goes to ``steps.jsonl``, written a few times a
second with ``progress.json`` (the live progress) and at the end; ``progress.json`` carries the ``phase``:
``unprofiled`` → ``profiling`` → (``exporting`` → ``cut``). When the
active window ends, the trace is exported as ``tb/rank{R}.<ns>.pt.trace.json.gz``.

**The memory guard's signal** (SIGUSR1, sent by the runner's monitor: ``profilers.run.agent_files``) means
"memory is past the limit". What it stops depends on the phase:

- while the profiler records, the profile itself is what grows (its event buffer: one event per op, per
  allocation, with shapes): the profile is **cut** right there — the profiler stops, the trace so far (the
  whole profiled steps and part of the current one) is exported, and the script runs on unprofiled to the end
  of that step, where the agent stops it (:class:`StopTraining`). Nothing about the script changed;
- otherwise (unprofiled steps, or after a cut) the script's own memory is what grows: the step in progress is
  interrupted with :class:`MemoryGuardStop` and the run ends ``out_of_memory``;
- while the cut profile is being exported, further signals are ignored (the monitor waits for ``cut``).

Peaks are recorded apart: ``peak_rss_unprofiled_mb`` (``ru_maxrss`` when the profiler starts recording) and
``peak_rss_profiled_mb`` (the window's own peak, its export included), see :meth:`StepRecorder.memory_facts`.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Callable

import torch

from stepwise_agent import layers, rank_summary
from stepwise_agent.hostinfo import RssReader, peak_rss_mb
from stepwise_agent.step_log import row_dict

PROFILE_WAIT, PROFILE_WARMUP = 1, 1
GUARD_SIGNAL = signal.SIGUSR1
RUNNING = "running"
#: ``progress.json`` while steps run: at most this often (its atomic write costs a few hundred
#: microseconds, more than a small model's whole step); at once on the first and the last step and
#: whenever the phase changes
PROGRESS_EVERY_S = 0.25
#: an unprofiled step reads this process's RSS at most this often (the read costs several
#: microseconds inside a training loop); the rows between say ``rss_mb: null``. A profiled step
#: reads it every time: the window's peak is measured
RSS_EVERY_S = 0.005
UNPROFILED, PROFILING, EXPORTING, CUT = (
    "unprofiled",
    "profiling",
    "exporting",
    "cut",
)  # progress.json "phase"


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON through a temporary file and a rename, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, allow_nan=False, default=str)
    os.replace(tmp, path)


class MemoryGuardStop(BaseException):
    """Raised in the script's main thread when the runner's memory guard ends the run (a BaseException, like
    KeyboardInterrupt, so the script's own ``except Exception`` does not swallow it)."""


class StopTraining(SystemExit):
    """Raised from a step hook once the profiled steps are recorded: the script has done its part."""


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


class StepRecorder:
    """Times steps, drives the profiler schedule, writes steps/progress/trace into ``run_dir``. ``wait`` steps
    run before the profiler's warm-up step and ``active`` profiled steps; ``rank`` names this process's rows."""

    def __init__(
        self,
        run_dir: Path,
        active: int,
        wait: int = PROFILE_WAIT,
        rank: int = 0,
        leader: bool = True,
        trace_ranks: list[int] | str | None = None,
    ) -> None:
        self.run_dir, self.active, self.wait, self.rank, self.leader = (
            run_dir,
            active,
            wait,
            rank,
            leader,
        )
        # Summaries at capture time: under torchrun (more than one rank), or whenever only some ranks keep traces.
        self.trace_ranks = trace_ranks
        self.summarise = trace_ranks is not None or int(os.environ.get("WORLD_SIZE", "1")) > 1
        self.total = wait + PROFILE_WARMUP + active
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.prof = torch.profiler.profile(
            activities=activities,
            profile_memory=True,
            record_shapes=True,  # dtypes: is bf16 already on?
            schedule=torch.profiler.schedule(
                wait=wait, warmup=PROFILE_WARMUP, active=active, repeat=1
            ),
            on_trace_ready=self._export,
        )
        self.traces: list[Path] = []
        self.steps_done = 0
        self.last_loss: float | None = None
        self.phase = UNPROFILED
        self.cut_during_step: int | None = (
            None  # the step whose profile was cut (the trace holds part of it)
        )
        self.peak_unprofiled_mb: float | None = None
        self._peak_profiled_mb: float | None = None
        # ru_maxrss survives fork + exec: a child of a 1.1 GiB launcher (a test process, a dashboard) starts with its
        # parent's high-water mark. It tells this process's own peak only once it has grown past that start.
        self._inherited_maxrss = peak_rss_mb()
        self._max_rss_seen = 0.0  # the largest RSS sampled at an unprofiled step's end
        self._busy = False  # inside our own step bookkeeping: a cut waits for its end
        self._cut_pending = False
        self._fh = open(run_dir / "steps.jsonl", "a", encoding="utf-8")
        # steps.jsonl rows not yet written, with their profile-cut mark (see _flush_rows)
        self._rows: list[tuple[tuple[Any, ...], bool]] = []
        self._rss_at = -1.0  # when RSS was last read (perf_counter)
        self._rss = RssReader()
        self._progress_at = 0.0  # when progress.json was last written during the steps (monotonic)
        self._progress_phase: str | None = None
        self._started = time.time()
        self._t_last = time.perf_counter()
        self._running = False
        self.data_ms: Callable[[], float | None] | None = (
            None  # the detector's time in DataLoader.__next__ this step
        )
        # Per-module times of the profiled steps (stepwise_agent.layers), rank 0's: its hooks run in the window only
        self.layers = layers.LayerRecorder() if rank == 0 and layers.enabled() else None
        self._profiled_ms: list[float] = []

    def start(self) -> None:
        """From now on the guard's signal is this recorder's to answer. The profiler starts at the step
        before its window (:meth:`_start_profiler`): an unprofiled step carries none of it."""
        signal.signal(GUARD_SIGNAL, lambda signum, frame: self.on_guard_signal())
        if self.wait == 0:
            self._start_profiler()
        self._t_last = time.perf_counter()

    def _start_profiler(self) -> None:
        """Start the schedule at step ``wait``, its warm-up, as if it had stepped from 0: the same
        ``ProfilerStep#`` numbers, without a ``record_function`` range around every unprofiled step."""
        if self.wait:
            prof: Any = self.prof  # the schedule's state, as its constructor sets it
            prof.step_num = self.wait
            prof.current_action = prof.schedule(self.wait)
            # newer torch keeps the schedule's raw action beside current_action
            if hasattr(prof, "_prev_schedule_action"):
                prof._prev_schedule_action = prof.current_action
        self.prof.start()
        self._running = True

    def on_step(self, loss: float | None, samples: int | None) -> None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()  # the step's kernels belong to the step
        wall_ms = (time.perf_counter() - self._t_last) * 1000.0
        self._busy = True
        try:
            self._record(wall_ms, loss, samples)
        finally:
            self._busy = False
        if self.phase == CUT or self.steps_done >= self.total:
            raise StopTraining(0)
        self._t_last = time.perf_counter()  # our own bookkeeping is not the script's step time

    def _record(self, wall_ms: float, loss: float | None, samples: int | None) -> None:
        step = self.steps_done
        now = time.perf_counter()
        rss = None
        if self.phase != UNPROFILED or now - self._rss_at >= RSS_EVERY_S:
            rss, self._rss_at = self._rss.mb(), now
        data_ms = self.data_ms() if self.data_ms is not None else None
        profiled = self.wait + PROFILE_WARMUP <= step < self.total
        row = (step, wall_ms, loss, samples, data_ms, profiled, time.time_ns(), rss, None)
        self._rows.append((row, self.cut_during_step == step))
        if self.phase == PROFILING and rss is not None:
            self._peak_profiled_mb = max(self._peak_profiled_mb or 0.0, rss)
        elif rss is not None:
            self._max_rss_seen = max(self._max_rss_seen, rss)
        self.last_loss = loss
        if self.phase == PROFILING:
            self._profiled_ms.append(wall_ms)
            if self.layers is not None:
                self.layers.next_step()
        self.steps_done += 1
        if not self._running and self.phase == UNPROFILED and self.steps_done == self.wait:
            self._start_profiler()
        elif self.phase != CUT and self._running:
            self.prof.step()  # ends the active window (and exports) after the last profiled step
            if self.phase == UNPROFILED and self._recording():
                self.phase, self.peak_unprofiled_mb = PROFILING, self._own_peak_mb()
                if self.layers is not None:
                    self.layers.start()
            elif self.phase == PROFILING and not self._recording():
                self.phase = (
                    UNPROFILED  # the window ended (exported): whatever grows now is the script's
                )
                self._close_window()
        if self._progress_due():
            self._progress_at, self._progress_phase = time.monotonic(), self.phase
            self._flush_rows()
            if self.leader:
                self.write_progress(loss, RUNNING)
        if self._cut_pending and self.phase == PROFILING:
            self.cut_profile()

    def _recording(self) -> bool:
        action = getattr(self.prof, "current_action", None)
        return getattr(action, "name", "") in ("RECORD", "RECORD_AND_SAVE")

    def on_guard_signal(self) -> None:
        """The runner's memory guard says memory is past its limit (see the module docs)."""
        if self.phase == EXPORTING:
            return
        if self.phase == PROFILING:
            if self._busy:
                self._cut_pending = True
            else:
                self.cut_profile()
            return
        raise MemoryGuardStop(
            "Stepwise's memory guard ended the run: memory passed its limit outside the "
            "profiled window"
        )

    def cut_profile(self) -> None:
        """Stop the profiler now, mid-step: the trace so far is exported and the rest of the step runs unprofiled."""
        self._cut_pending = False
        self.phase, self.cut_during_step = EXPORTING, self.steps_done
        rss = self._rss.mb()
        if rss is not None:
            self._peak_profiled_mb = max(self._peak_profiled_mb or 0.0, rss)
        if self.leader:
            self.write_progress(self.last_loss, RUNNING)
        if self._running:
            self._running = False
            self.prof.stop()  # closes ProfilerStep#k here and exports (on_trace_ready)
        self._close_window()
        self.phase = CUT
        if self.leader:
            self.write_progress(self.last_loss, RUNNING)

    def _close_window(self) -> None:
        """The window's peak: ``ru_maxrss`` counts for it when it rose above the unprofiled peak."""
        peak = self._own_peak_mb()
        if self.peak_unprofiled_mb is not None and peak > self.peak_unprofiled_mb:
            self._peak_profiled_mb = max(self._peak_profiled_mb or 0.0, peak)

    def _own_peak_mb(self) -> float:
        """This process's peak RSS: ``ru_maxrss`` once it grew past what the process inherited, else the largest
        RSS sampled at the end of a step."""
        peak = peak_rss_mb()
        return (
            max(peak, self._max_rss_seen) if peak > self._inherited_maxrss else self._max_rss_seen
        )

    def memory_facts(self) -> dict[str, Any]:
        """``agent_result.json``'s memory fields: the unprofiled and the profiled peaks, apart (MiB, this process)."""
        unprofiled = (
            self.peak_unprofiled_mb if self.peak_unprofiled_mb is not None else self._own_peak_mb()
        )
        return {
            "peak_rss_unprofiled_mb": _round(unprofiled),
            "peak_rss_profiled_mb": _round(self._peak_profiled_mb),
            "profile_cut_during_step": self.cut_during_step,
        }

    def _progress_due(self) -> bool:
        return (
            self.steps_done <= 1
            or self.steps_done >= self.total
            or self.phase != self._progress_phase
            or time.monotonic() - self._progress_at >= PROGRESS_EVERY_S
        )

    def _flush_rows(self) -> None:
        """The rows since the last flush, in one write: a step pays for a list append, and readers
        (the runner, to-quality's follow loop) see them as often as the progress file."""
        if not self._rows:
            return
        lines = []
        for row, cut in self._rows:
            # the one row layout of steps.jsonl, the watch's writer's too; its time is the step's start
            out = row_dict(self.rank, row)
            if cut:
                out["profile_cut"] = True  # the trace holds only part of this step
            lines.append(json.dumps(out) + "\n")
        self._fh.write("".join(lines))
        self._fh.flush()
        self._rows.clear()

    def write_progress(self, loss: float | None, status: str) -> None:
        elapsed = time.time() - self._started
        left = max(self.total - self.steps_done, 0)
        eta = elapsed / self.steps_done * left if self.steps_done else None
        write_json_atomic(
            self.run_dir / "progress.json",
            {
                "step": self.steps_done,
                "total_steps": self.total,
                "loss": loss,
                "eta_s": eta,
                "elapsed_s": elapsed,
                "status": status,
                "phase": self.phase,
                "updated_unix": time.time(),
                "peak_unprofiled_mb": _round(self.peak_unprofiled_mb),
            },
        )  # exact (ru_maxrss): the guard's floor

    def stop(self) -> None:
        """Stop profiling (exporting a partial window if the script ended early) and close the step log."""
        if self.layers is not None:
            self.layers.stop()  # hooks out of the script's way even if the window never closed
        if self._running:
            self._running = False
            if self.phase == PROFILING:
                self.phase = EXPORTING
            self.prof.stop()
            if self.phase == EXPORTING:
                self._close_window()
                self.phase = UNPROFILED
        self._flush_rows()
        self._fh.close()
        self._rss.close()

    def _export(self, prof: torch.profiler.profile) -> None:
        if self.layers is not None:
            self.layers.stop()
            ms, on_gpu = (
                self._profiled_ms,
                torch.cuda.is_available() and torch.cuda.is_initialized(),
            )
            try:
                layers.write_layers(
                    self.run_dir,
                    self.layers,
                    prof.events(),
                    on_gpu,
                    sum(ms) / len(ms) if ms else None,
                    write_json_atomic,
                )
            except Exception as err:  # noqa: BLE001 - the per-module view must never cost the run its trace
                write_json_atomic(
                    self.run_dir / layers.LAYERS_FILE, {"error": f"{type(err).__name__}: {err}"}
                )
            self.layers = None
        if (
            self.summarise
        ):  # every rank's per-step summary; the full trace only where asked (rank_summary)
            world = int(os.environ.get("WORLD_SIZE", "1"))
            rank_summary.write_summary(
                self.run_dir,
                rank_summary.summarise_events(
                    prof.events(), self.rank, world, first_step=self.wait + PROFILE_WARMUP
                ),
            )
            if not rank_summary.keeps_trace(self.run_dir, self.rank, world, self.trace_ranks):
                return
        tb = self.run_dir / "tb"
        tb.mkdir(exist_ok=True)
        name = f"rank{self.rank}.{time.time_ns()}.pt.trace.json"
        partial = (
            tb / f"{name}.partial.gz"
        )  # not a trace name until complete; .gz makes torch gzip it
        prof.export_chrome_trace(str(partial))
        os.replace(partial, tb / f"{name}.gz")
        self.traces.append(tb / f"{name}.gz")
