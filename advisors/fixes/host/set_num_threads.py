"""Intra-op threads to the free cores: no more threads than the cores other programs left free.

Its bound counts only the operator time lost to oversubscription. With demand ``D`` (intra-op
threads × training processes) on ``F`` free cores, each thread keeping a fair ``F/D`` share of a
core, the operators run at most ``D / F`` slower than on threads matched to the free cores; after
the fix the demand is ``D' = n × processes``, still ``D'/F`` slow where ``D' > F`` (less than one
free core a process). So the operators keep at least ``max(D', F) / D`` of their time and the fix
gives back at most ``w × (1 − max(D', F) / D)`` of the step, ``w`` their share of it: the bound
``1 / (1 − w (1 − max(D', F) / D))``. Spinning waits (libgomp's default) can lose more than a fair
share (a descheduled thread holds every barrier for a scheduler slice): a measured gain above the
bound says the pool spun.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from advisors.bounds import Reach
from advisors.facts import Facts
from advisors.fit import free_cores, threads_for, usable_cores
from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection
from advisors.fixes.context import ScriptContext
from advisors.verdict import Bottleneck
from profilers.telemetry.threads import ThreadUse


def _threads(ctx: ScriptContext) -> dict[str, Any] | None:
    """Intra-op threads that fit the cores other programs left free (:func:`advisors.fit.threads_for`), when that
    is fewer than the last run used."""
    t = ctx.threads
    if t is None:
        return None
    n = threads_for(t.affinity or ctx.cores, ctx.other_cores, t.local_processes)
    return {"num_threads": n} if n < t.intra_op else None


def oversubscribed_time(f: Facts) -> Reach | None:
    """The operators' time lost to oversubscribed threads on a CPU run (see the module docs);
    ``None`` when the run's threads, its host telemetry or an oversubscription are missing."""
    t, tel = f.threads, f.telemetry
    if not f.has_steps or f.device != "cpu" or t is None or tel is None or tel.other_cores is None:
        return None
    usable = usable_cores(t, tel)
    if not usable:
        return None
    free = free_cores(usable, tel.other_cores)
    n = threads_for(usable, tel.other_cores, t.local_processes)
    after = n * t.local_processes
    if t.demand <= max(free, after):
        return None
    kept = max(after, free) / t.demand
    w = f.device_work
    threads = f"{n} thread{'s' if n > 1 else ''} a process"
    return Reach(
        w * (1.0 - kept),
        f"the operators ({100 * w:.1f}% of the step) ran at most {t.demand} threads / "
        f"{free:.1f} free cores slower, each thread keeping a fair share of the free "
        f"cores, and keep {100 * kept:.0f}% of their time with {threads}; spinning waits "
        "(libgomp's default) can lose more than a fair share",
    )


_BUSY = replace(
    ON_CPU,
    threads=ThreadUse(intra_op=4, local_processes=1, cpu_count=4, affinity=4),
    other_cores=2.0,
)

FIX = FixSpec(
    id="set_num_threads",
    title="Intra-op threads to the free cores",
    bottleneck=Bottleneck.HOST,
    applies_to="any",
    explanation="One intra-op thread per free core: more threads than cores other programs left free wait for one "
    "another at every operator's barrier.",
    snippet="torch.set_num_threads(n)   # n = free cores / training processes on this machine, before training\n"
    "# or for the script and the processes it starts:  OMP_NUM_THREADS=n python train.py",
    docs="https://pytorch.org/docs/stable/generated/torch.set_num_threads.html",
    effort="config",
    injection=Injection(_threads, "num_threads"),
    bound=oversubscribed_time,
    examples=(
        FixExample(_BUSY, knobs={"num_threads": 2}),  # 4 threads, 2 of 4 cores taken by others
        FixExample(ON_CPU, knobs={}),
    ),
)  # no thread record: nothing to choose from
