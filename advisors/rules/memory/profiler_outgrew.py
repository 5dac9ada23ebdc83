"""MEM007 — the profiler's own events outgrew their memory budget (the measurement's cost, not the script's)."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule
from advisors.synthetic import observation, run_facts

_CUT = (
    "the profiler's events outgrew the profile's memory budget during step 2: the process tree reached 440 MiB "
    "with the profiler recording, over the 405 MiB allowed, while the script's own unprofiled steps peaked at "
    "375 MiB"
)


class ProfilerOutgrew(Rule):
    """A stored run whose profile the memory guard cut (``profilers.run.memory_guard``): while the profiler
    recorded, the process grew past the profile's budget over the peak of its unprofiled steps — its event
    buffer (one event per op and per allocation, with shapes) is what grew, e.g. an LBFGS step of thousands of
    small closure calls. The script's own memory is not at stake, so this finding never advises a smaller batch
    (MEM002 does not fire: the run ended ``ok``); it says that the trace holds part of a step.

    Evidence: the unprofiled and the profiled peaks, apart; the guard's words. Severity 0 (no step time). Thresholds:
    ``confidence`` (0.95): the cut is a recorded fact.

    Fix: none for the script. To profile whole steps, give the profile more room (``STEPWISE_PROFILE_BUDGET_MB``)
    or profile a shorter input.
    """

    id, name, bottleneck = "MEM007", "profiler-outgrew", Bottleneck.MEMORY
    cause = "profiler_cost"
    thresholds = {"confidence": 0.95}
    fires = (
        Example(
            "the guard cut an LBFGS step's profile at 440 MiB; the script peaked at 375 MiB unprofiled",
            lambda: observation(
                no_trace=True,
                run=run_facts(
                    peak_memory_mb=800.0,
                    peak_memory_unprofiled_mb=375.0,
                    peak_memory_profiled_mb=795.0,
                    profile_cut=_CUT,
                ),
            ),
            fix=None,
            severity=0.0,
        ),
    )
    passes = (
        Example("a whole profile", lambda: observation(no_trace=True, run=run_facts("ok"))),
        Example("uploaded trace, no run", lambda: observation({"gpu_compute": 0.9})),
    )

    def missing(self, f: Facts) -> str | None:
        return None if f.run else "not a stored run: no memory guard watched it"

    def check(self, f: Facts) -> Finding | None:
        run = f.run
        if run is None or not run.profile_cut:
            return None
        own = (
            f"; the script itself peaked at {run.peak_memory_unprofiled_mb:.0f} MiB unprofiled"
            if run.peak_memory_unprofiled_mb is not None
            else ""
        )
        return self.finding(
            f,
            severity=0.0,
            confidence=self.t["confidence"],
            message=f"The profiler's events outgrew their memory budget, so the profile was cut: the trace holds "
            f"part of a step{own}. Nothing in the script needs to change for this.",
            evidence={
                "profile_cut": run.profile_cut,
                "peak_memory_unprofiled_mb": run.peak_memory_unprofiled_mb,
                "peak_memory_profiled_mb": run.peak_memory_profiled_mb,
            },
        )
