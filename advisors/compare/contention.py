"""Did other programs slow a run down? The part of run-to-run noise a run's own telemetry can see.

A run's host telemetry (``run.telemetry``: medians over its steady steps) holds the CPU its process tree used
(``process_cpu_pct``, 100 = one core) and how busy the whole machine was (``system_cpu_pct``); other programs
used the difference. When, during the slower of two runs, other programs took cores the faster run's process
was using, and the slower run's process got fewer cores, the competition can explain its slowdown — and by
how much cannot be bounded from the shares: threads that wait for each other lose more than their share of
the cores: on a shared 2-core machine, runs of one spec slowed more than in proportion to the cores they lost
(measured: benchmarks/results/contention-2026-11-23.md).

So such a comparison cannot tell a change from the competition (:func:`competed`): the verdict stays
``same`` and says so. A real slowdown (more work per step) keeps the process's cores and is not excused; a
run that needs fewer cores (fewer DataLoader workers) is suspected only when other programs also took the
cores the faster run used. Traces and runs without host telemetry carry no such figures: nothing is suspected.
"""

from __future__ import annotations

from dataclasses import dataclass

from profilers.telemetry.summary import TelemetrySummary

OTHERS_MIN_CORES = 0.25  # other programs' use below this is background (the sampler, the shell), not competition
SLACK_CORES = 0.25  # telemetry medians over a few seconds at 10 Hz wander by about this much
FEWER_CORES = 0.9  # a process that got under this share of the other run's cores was held back
NEIGHBOUR_CORES = 0.5  # other programs' use that differs this much between the runs is worth a note


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
    return HostCpu(cores=t.cpu_count, busy=t.system_cpu_pct / 100 * t.cpu_count, ours=t.process_cpu_pct / 100)


def competed(slow: HostCpu | None, fast: HostCpu | None) -> bool:
    """Whether competition for the cores may explain why ``slow`` was slower than ``fast``: its process got under
    :data:`FEWER_CORES` of the cores the faster run's used, while other programs used more than the cores the
    faster run left free (give or take :data:`SLACK_CORES`)."""
    if slow is None or fast is None:
        return False
    held_back = slow.ours < FEWER_CORES * fast.ours
    took_ours = slow.others >= OTHERS_MIN_CORES and slow.others > slow.cores - fast.ours - SLACK_CORES
    return held_back and took_ours


def neighbour_note(base: HostCpu | None, new: HostCpu | None) -> str | None:
    """A note when other programs' use of the machine differed between the runs although neither run lost its
    cores: cores share caches and memory bandwidth (and SMT siblings their execution units), so a neighbour can
    still slow a step — measured 1.155x for a one-thread run with another program on the other core of a
    shared 2-core machine. Not a reason to withhold a verdict: a tolerance above such offsets is."""
    if base is None or new is None or abs(new.others - base.others) < NEIGHBOUR_CORES:
        return None
    return (f"other programs used {new.others:.2f} of the machine's {new.cores} cores during NEW and "
            f"{base.others:.2f} during BASE: a busy neighbour slows a step through the shared caches and memory "
            "even when the run keeps its own cores (up to 1.16x measured on a shared 2-core machine)")
