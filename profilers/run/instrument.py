"""In-run instrumentation: the profiler schedule, an honest step timer, and the watchdog (memory budget, step timeout).

Everything here is built to cost nothing measurable outside the active profiling window: the timer reads
``perf_counter_ns`` (plus one ``torch.cuda.synchronize()`` per step on CUDA, which the step's ``loss.item()``
pays anyway), and the watchdog is a daemon thread that wakes every ``interval_s`` (≤ 50 ms) to read RSS.

``STEPWISE_BARE=1`` in the worker's environment turns instrumentation off (no torch.profiler, no telemetry,
no TensorBoard scalars; steps.jsonl, progress.json and result.json are still written so the bare run can be
timed) — the reference for the "instrumentation costs < 5%" benchmark.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from typing import Callable

import psutil
import torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

from profilers.telemetry.proctree import Descendants
from profilers.run.spec import TrainingSpec

BARE_ENV = "STEPWISE_BARE"
WATCHDOG_INTERVAL_S = 0.05  # the contract: RSS is polled at least every 50 ms
MB = 1024 * 1024


def bare_requested(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """True when ``STEPWISE_BARE`` asks for an uninstrumented run (``1``/``true``/``yes``)."""
    return environ.get(BARE_ENV, "").strip().lower() in ("1", "true", "yes")


def profiler_schedule(spec: TrainingSpec) -> Callable[[int], torch.profiler.ProfilerAction]:
    """``wait``/``warmup``/``active`` counted after the run's warm-up steps, so no trace shows a cold step."""
    return schedule(
        skip_first=spec.warmup_steps,
        wait=spec.profile_wait,
        warmup=spec.profile_warmup,
        active=spec.profile_active,
        repeat=1,
    )


def profiled_steps(spec: TrainingSpec) -> range:
    """Steps on which the profiler is collecting (its warm-up and active phases): they carry its overhead."""
    first = spec.warmup_steps + spec.profile_wait
    return range(first, first + spec.profile_warmup + spec.profile_active)


def make_profiler(spec: TrainingSpec, tb_dir: os.PathLike[str] | str, rank: int, cuda: bool) -> profile:
    """The ``torch.profiler.profile`` of the run-dir contract: traces land as ``tb/rank{R}.<ns>.pt.trace.json.gz``."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    return profile(
        activities=activities,
        schedule=profiler_schedule(spec),
        profile_memory=spec.profile_memory,
        record_shapes=True,
        on_trace_ready=tensorboard_trace_handler(str(tb_dir), worker_name=f"rank{rank}", use_gzip=True),
    )


class StepTimer:
    """Wall time of one step, synchronising the device first so queued kernels are not left out.

    ``clock`` and ``sync`` are injectable so tests can drive it with a fake clock.
    """

    def __init__(self, cuda: bool, clock: Callable[[], int] = time.perf_counter_ns,
                 sync: Callable[[], None] | None = None) -> None:
        self._clock = clock
        self._sync = sync if sync is not None else (torch.cuda.synchronize if cuda else (lambda: None))
        self._start: int | None = None

    def start(self) -> None:
        self._sync()
        self._start = self._clock()

    def stop_ms(self) -> float:
        if self._start is None:
            raise RuntimeError("StepTimer.stop_ms() called before start()")
        self._sync()
        elapsed = self._clock() - self._start
        self._start = None
        return elapsed / 1e6


def release_free_heap() -> bool:
    """Give the heap's free pages back to the OS (glibc ``malloc_trim``); False where glibc is absent.

    Why: while the profiler collects, its many small allocations land between freed activations, so the
    heap cannot reuse those holes and RSS ratchets up by about one step's activations per profiled step
    (measured +100 MB per step on ``memory_bound`` tiny, flat before the window). Trimming once the trace is
    written (and the profiler's in-memory copy dropped) brings RSS back to the workload's own level.
    """
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def process_tree_rss_mb(proc: psutil.Process, children: list[psutil.Process] | None = None) -> float:
    """RSS of ``proc`` plus the unique memory (USS) of its children (DataLoader workers).

    Children are forked and share the parent's pages copy-on-write; adding their RSS would count torch's
    libraries twice, so only what each child owns alone is added. ``children``: the descendants if the caller
    already knows them (the watchdog keeps a :class:`~profilers.telemetry.proctree.Descendants`), else they are walked.
    """
    total = proc.memory_info().rss
    for child in proc.children(recursive=True) if children is None else children:
        try:
            total += child.memory_full_info().uss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return total / MB


def own_peak_rss_mb() -> float:
    """High-water RSS of this process (``ru_maxrss`` is in KiB on Linux), the profiler's footprint included."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Watchdog(threading.Thread):
    """Polls memory every ``interval_s``; calls ``on_oom(peak_mb)`` past the budget, ``on_timeout(step)`` past
    ``step_timeout_s``. The callbacks are expected to end the process (the main thread may be stuck in a step).

    Memory is the RSS of the process tree (:func:`process_tree_rss_mb`). While :meth:`pause_memory` is on —
    the profiler's collecting window and trace export — memory is neither checked nor counted in ``peak_mb``:
    that footprint is the profiler's, not the workload's, and a workload's activations recur on every step,
    so a real breach is still caught on the next plain step.
    """

    def __init__(self, memory_budget_mb: float | None, step_timeout_s: float | None,
                 on_oom: Callable[[float], None], on_timeout: Callable[[int], None],
                 interval_s: float = WATCHDOG_INTERVAL_S, pid: int | None = None) -> None:
        super().__init__(name="stepwise-watchdog", daemon=True)
        self.memory_budget_mb = memory_budget_mb
        self.step_timeout_s = step_timeout_s
        self._on_oom, self._on_timeout = on_oom, on_timeout
        self._interval = min(interval_s, WATCHDOG_INTERVAL_S)
        self._proc = psutil.Process(pid)
        self._children = Descendants(self._proc)
        self._halt = threading.Event()
        self._step: tuple[int, float] | None = None  # (step, monotonic start) of the step in flight
        self.memory_paused = False
        self.peak_mb = 0.0

    def step_started(self, step: int) -> None:
        self._step = (step, time.monotonic())

    def step_finished(self) -> None:
        self._step = None

    def pause_memory(self, paused: bool) -> None:
        self.memory_paused = paused

    def check_once(self) -> None:
        """One poll (the thread calls this in a loop; tests call it directly)."""
        if not self.memory_paused:
            try:
                current = process_tree_rss_mb(self._proc, self._children.get())
            except psutil.Error:
                current = 0.0
            self.peak_mb = max(self.peak_mb, current)
            if self.memory_budget_mb is not None and current > self.memory_budget_mb:
                self._on_oom(self.peak_mb)
                return
        in_flight = self._step
        if self.step_timeout_s is not None and in_flight is not None:
            step, started = in_flight
            if time.monotonic() - started > self.step_timeout_s:
                self._on_timeout(step)

    def run(self) -> None:
        while not self._halt.wait(self._interval):
            self.check_once()

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(timeout=1.0)
