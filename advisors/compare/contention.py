"""Did other programs slow a run down? One rule for ``compare``'s verdict and the A/B pairs of a fix.

A run's host telemetry holds the CPU its process tree used (100 = one core) and how busy the whole machine was;
other programs used the difference. ``compare`` reads a run's medians over its steady steps (:func:`host_cpu`),
an A/B trial the mean over its timed steps (:mod:`advisors.experiments.trial_load`).

**The bound.** A neighbour that took ``o`` more of the machine's ``C`` cores during one run than during the other
slows that run at most :func:`slowdown_bound` ``= (C / (C − o))^1.5``: the run kept ``(C − o) / C`` of the cores,
and threads that wait for each other lose more than their share of them (a run at 0.75 of its cores measured 1.47x
slower on a shared 2-core machine, the power covers that: ``(2 / 1.5)^1.5 = 1.54``; a one-thread run with another
program on the other core 1.155x, within ``(2 / 1)^1.5``) — benchmarks/results/contention-2026-11-23.md. Where
other programs were busy during both runs the cores counted are those left free: a run that kept ``C − o₁`` where
the other had ``C − o₂`` is slowed at most ``((C − o₂) / (C − o₁))^1.5``, the same formula when the other run had
the machine to itself. On a machine near saturation a few tenths of a core are most of what a run gets: two runs
of one spec read 1.82x apart while others took 1.15 and 1.34 of 2 cores. A run that kept at least
:data:`KEPT_SHARE` of the other's free cores is within the telemetry's own wander: no effect.

**The rule** (:func:`holds_beyond_contention`): a verdict stands when the change, with the neighbour's largest
possible effect taken out, still keeps its side of the edge. A speed-up (after ÷ before) claimed beyond the edge
is divided by what the neighbour could have cost the *before* run; one claimed short of it is multiplied by what
it could have cost the *after* run. Otherwise the competition could explain the result: ``compare`` answers
``inconclusive``, and an A/B pair verdict without enough uncontended pairs too. A 9.11x speed-up with other
programs on 0.29 and 0.43 cores is no one's doing but the fix's.
"""

from __future__ import annotations

from dataclasses import dataclass

from profilers.telemetry.summary import TelemetrySummary

KEPT_SHARE = 0.9  # a run that kept this share of the cores the other run had free was not held back
CONTENDED_CORES = 0.5  # other programs' use from which a trial is left out of a verdict, and a difference is noted
POWER = 1.5  # waiting threads lose more than their share of the cores (module docs)


@dataclass(frozen=True)
class HostCpu:
    """Cores during a run's steady steps (medians): the machine's, those busy, and those its process tree used."""

    cores: int
    busy: float
    ours: float

    @property
    def others(self) -> float:
        """Cores other programs used."""
        return max(0.0, self.busy - self.ours)


def host_cpu(t: TelemetrySummary | None) -> HostCpu | None:
    """The figures from a run's telemetry summary, or ``None`` when it did not record them."""
    if t is None or not t.cpu_count or t.system_cpu_pct is None or t.process_cpu_pct is None:
        return None
    return HostCpu(
        cores=t.cpu_count, busy=t.system_cpu_pct / 100 * t.cpu_count, ours=t.process_cpu_pct / 100
    )


def slowdown_bound(others: float, others_then: float, cores: int | None) -> float:
    """The most other programs, on ``others`` of the machine's ``cores`` during a run and on ``others_then``
    during the run it is compared with, can have slowed it (see the module docs)."""
    if not cores:
        return 1.0
    kept, had = max(cores - others, 0.25), max(cores - others_then, 0.25)
    return 1.0 if kept >= KEPT_SHARE * had else (had / kept) ** POWER


def speedup_range(
    speedup: float,
    others_before: float,
    others_after: float,
    cores: int | None,
    apart: bool = False,
) -> tuple[float, float]:
    """The least and the most ``speedup`` (after ÷ before throughput) could be without the neighbour: it may have
    slowed the before run (the change is then smaller) or the after run (larger).

    ``apart``: the two runs were measured at different times (``compare``), not interleaved pair by pair. When
    neighbours took :data:`CONTENDED_CORES` or more during both, what each took from its own run cannot be told
    from the other's — a neighbour's share wanders within a run, and two runs of one script beside one read
    "improvement" — so each run is bounded by its own neighbour, as against a machine left free."""
    both = apart and min(others_before, others_after) >= CONTENDED_CORES
    then_before, then_after = (0.0, 0.0) if both else (others_after, others_before)
    return (
        speedup / slowdown_bound(others_before, then_before, cores),
        speedup * slowdown_bound(others_after, then_after, cores),
    )


def holds_beyond_contention(
    speedup: float,
    others_before: float,
    others_after: float,
    cores: int | None,
    edge: float,
    faster: bool,
    apart: bool = False,
) -> bool:
    """Whether a verdict that ``speedup`` is beyond ``edge`` (``faster``) or short of it (not ``faster``) stands
    once the neighbour's largest possible effect is taken out (see the module docs; ``apart``: see
    :func:`speedup_range`)."""
    least, most = speedup_range(speedup, others_before, others_after, cores, apart)
    return least > edge if faster else most < edge
