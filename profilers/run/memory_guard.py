"""The memory guard of a launched script: it watches the process tree's host memory from outside and tells the
profiler's own growth apart from the script's.

**The limit** (:func:`memory_limit_mb`): ``STEPWISE_MEMORY_LIMIT_MB`` when set; else the run may take
:data:`GUARD_SHARE` of the memory available when it started, and always leaves the rest of the machine at least
:data:`RESERVE_MIN_MB` or :data:`RESERVE_SHARE` of its total memory, whichever is more (other programs on a
shared machine keep room to grow).

**The profile's budget**: the profile's whole cost — recording its events, then finalising and exporting
them — may add at most ``STEPWISE_PROFILE_BUDGET_MB`` over the peak of the unprofiled steps (the tree's
sampled peak, floored by the agent's exact ``ru_maxrss`` from ``progress.json``, so a short step's transient
peak that sampling missed is not taken for the profiler's growth; default budget: what is free — the
room the limit leaves above that peak, the limit itself following the memory available when the run started),
and never reach the limit. (A fixed default of max(1 GiB, that peak) let a tree of four DataLoader workers grow
about 100 MiB while recording: minGPT's and llm.c's profiles were all cut at 621 MiB with 16 GB free.) Finalising multiplies
what recording grew (:data:`FINALISE_FACTOR`; measured on an LBFGS step: recording +183 MiB became +1407 MiB
after the profiler's stop with memory events and shapes, +85 → +549 MiB without, +36 → +420 MiB when cut
early), so while the profiler records (``progress.json``'s ``phase`` is ``profiling``) the tree may grow by the
budget / :data:`FINALISE_FACTOR`. Past it, the profile itself is what grew (its event buffer: an LBFGS step
of thousands of small calls is millions of events): the guard asks the agent to **cut** the profile (SIGUSR1;
:mod:`stepwise_agent.recorder`), which exports the trace so far and finishes the step unprofiled. The script
is not blamed: the run ends ``ok`` with the finding "the profiler's events outgrew …". The export may take
:data:`EXPORT_GRACE_S` before the tree is killed.

**The script's own memory**: past the limit outside the profiled window — or, after a cut, growing on by more
than :data:`AFTER_CUT_MARGIN` of the limit — the guard asks the agent to end the run (the same signal), and
kills the tree when it has not ended after :data:`GUARD_GRACE_S`; the run ends ``out_of_memory``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import psutil

from profilers.store.files import write_json_atomic

MEMORY_LIMIT_ENV = "STEPWISE_MEMORY_LIMIT_MB"
PROFILE_BUDGET_ENV = "STEPWISE_PROFILE_BUDGET_MB"
GUARD_SHARE = 0.75  # default limit: this share of the memory available when the run started …
RESERVE_MIN_MB, RESERVE_SHARE = (
    2048.0,
    0.10,
)  # … leaving the machine at least max(2 GiB, 10% of its total)
FINALISE_FACTOR = (
    10.0  # the profiler's stop and export end at about this multiple of what its recording grew
)
AFTER_CUT_MARGIN = (
    0.05  # after a cut, growth past max(limit, memory at the cut) + this share of it: the script's
)
GUARD_GRACE_S = (
    10.0  # after asking the agent to end the run, kill the tree if it still lives this long after
)
EXPORT_GRACE_S = 120.0  # after asking for a cut: the time the agent has to export the trace so far
OOM_ADVICE = "profile fewer steps (--steps), or use a smaller batch"
GUARD_ADVICE = "the profiler was not recording, so use a smaller batch (or accumulate gradients over micro-batches)"
MB = 1024 * 1024
PROFILING, EXPORTING, CUT = (
    "profiling",
    "exporting",
    "cut",
)  # progress.json "phase" (stepwise_agent.recorder)


@dataclass(frozen=True)
class GuardTrip:
    """The memory guard ended the run: the tree's host memory ``rss_mb`` passed ``limit_mb`` at ``step``;
    ``after_cut``: the profile had already been cut, so what grew on is the script's own memory."""

    rss_mb: float
    limit_mb: float
    step: int | None
    after_cut: bool = False

    def message(self) -> str:
        where = f" during step {self.step}" if self.step is not None else ""
        what = (
            "after the profile was cut, the script's own"
            if self.after_cut
            else "the process tree's host"
        )
        return (
            f"out of memory: the memory guard ended the run{where}: {what} memory reached "
            f"{self.rss_mb:.0f} MiB, over the limit of {self.limit_mb:.0f} MiB; {GUARD_ADVICE}"
        )


@dataclass(frozen=True)
class ProfileCut:
    """The profile outgrew its budget: ``rss_mb`` passed ``limit_mb`` (the script's own unprofiled peak was
    ``unprofiled_mb``) during ``step``; the agent was asked to cut the profile there."""

    rss_mb: float
    limit_mb: float
    unprofiled_mb: float
    step: int | None

    def message(self) -> str:
        where = f" during step {self.step}" if self.step is not None else ""
        return (
            f"the profiler's events outgrew the profile's memory budget{where}: the process tree reached "
            f"{self.rss_mb:.0f} MiB with the profiler recording, over the {self.limit_mb:.0f} MiB allowed, while "
            f"the script's own unprofiled steps peaked at {self.unprofiled_mb:.0f} MiB. The profile was cut "
            "there (the trace keeps what it recorded, a lighter profile of part of a step); the script itself "
            "needs no change for this"
        )


def memory_limit_mb(env: Mapping[str, str] | None = None) -> tuple[float, str]:
    """``(limit in MiB, where it comes from)``: ``STEPWISE_MEMORY_LIMIT_MB``, else the default rule above."""
    raw = (env or os.environ).get(MEMORY_LIMIT_ENV)
    if raw:
        try:
            return float(raw), MEMORY_LIMIT_ENV
        except ValueError:
            pass
    vm = psutil.virtual_memory()
    reserve = max(RESERVE_MIN_MB, RESERVE_SHARE * vm.total / MB)
    limit = max(
        min(GUARD_SHARE * vm.available / MB, vm.available / MB - reserve), 0.25 * vm.available / MB
    )
    return limit, (
        f"{GUARD_SHARE:.0%} of the memory available at start, leaving the machine at least "
        f"{reserve:.0f} MiB"
    )


def profile_budget_mb(
    env: Mapping[str, str] | None, unprofiled_mb: float, limit_mb: float
) -> float:
    """How much the profiled window may add over the unprofiled peak: what is free under the run's limit
    (``limit_mb`` − ``unprofiled_mb``); ``STEPWISE_PROFILE_BUDGET_MB`` sets less, never more."""
    free = max(limit_mb - unprofiled_mb, 0.0)
    raw = (env or os.environ).get(PROFILE_BUDGET_ENV)
    with contextlib.suppress(TypeError, ValueError):
        return min(float(raw), free)  # type: ignore[arg-type]
    return free


class MemoryGuard:
    """The guard's state for one run, fed one memory sample and the agent's phase at a time (see module docs)."""

    def __init__(self, run_dir: Path, env: Mapping[str, str] | None = None) -> None:
        self.run_dir, self._env = run_dir, dict(env or os.environ)
        self.limit_mb, self.limit_source = memory_limit_mb(self._env)
        self.trip: GuardTrip | None = None
        self.cut: ProfileCut | None = None
        self.peak_rss_mb = 0.0
        self.peak_unprofiled_mb: float | None = None
        self.peak_profiled_mb: float | None = None
        self._limit_after_cut: float | None = None
        self._kill_at: float | None = None

    def profile_limit_mb(self) -> float:
        """The tree's memory past which the recording profile is cut (see the module docs)."""
        unprofiled = self.peak_unprofiled_mb or 0.0
        return (
            unprofiled + profile_budget_mb(self._env, unprofiled, self.limit_mb) / FINALISE_FACTOR
        )

    def observe(self, rss: float | None, progress: Mapping[str, Any] | None) -> bool:
        """One sample; True when the tree must be killed now (a grace is over)."""
        if rss is None:
            return self._kill_at is not None and time.monotonic() > self._kill_at
        phase, step = (progress or {}).get("phase"), (progress or {}).get("step")
        self.peak_rss_mb = max(self.peak_rss_mb, rss)
        if phase in (PROFILING, EXPORTING):
            self.peak_profiled_mb = max(self.peak_profiled_mb or 0.0, rss)
        elif self.cut is None and phase != CUT:
            self.peak_unprofiled_mb = max(self.peak_unprofiled_mb or 0.0, rss)
        exact = (progress or {}).get(
            "peak_unprofiled_mb"
        )  # the agent's ru_maxrss: a short step's peak that
        if (
            isinstance(exact, (int, float)) and self.cut is None
        ):  # sampling at 10 Hz may have missed
            self.peak_unprofiled_mb = max(self.peak_unprofiled_mb or 0.0, float(exact))
        if (
            phase == PROFILING
            and self.cut is None
            and self.trip is None
            and rss > self.profile_limit_mb()
        ):
            self.cut = ProfileCut(
                rss, self.profile_limit_mb(), self.peak_unprofiled_mb or 0.0, step
            )
            self._record("profile_cut", rss, self.cut.limit_mb, step)
            self._signal_agents()
            self._kill_at = time.monotonic() + EXPORT_GRACE_S
        elif phase == CUT and self._limit_after_cut is None:
            self._kill_at = None  # the agent cut its profile: the export is done
            self._limit_after_cut = max(self.limit_mb, rss) + AFTER_CUT_MARGIN * self.limit_mb
        limit = self._limit_after_cut or self.limit_mb
        if (
            self.trip is None
            and phase != EXPORTING
            and rss > limit
            and not (phase == PROFILING and self.cut)
        ):
            self.trip = GuardTrip(rss, limit, step, after_cut=self.cut is not None)
            self._record("end_run", rss, limit, step)
            self._signal_agents()
            self._kill_at = time.monotonic() + GUARD_GRACE_S
        return self._kill_at is not None and time.monotonic() > self._kill_at

    def _record(self, action: str, rss: float, limit: float, step: int | None) -> None:
        write_json_atomic(
            self.run_dir / "memory_guard.json",
            {
                "action": action,
                "rss_mb": rss,
                "limit_mb": limit,
                "run_limit_mb": self.limit_mb,
                "limit_source": self.limit_source,
                "peak_unprofiled_mb": self.peak_unprofiled_mb,
                "step": step,
                "t_unix": time.time(),
            },
        )

    def _signal_agents(self) -> None:
        try:
            lines = (self.run_dir / "agent_pids.txt").read_text().split("\n")
        except OSError:
            return
        for line in lines:
            parts = line.split()
            if len(parts) == 2:
                with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                    os.kill(int(parts[1]), signal.SIGUSR1)
