"""Passive OpenMP waits: threads that wait for work sleep instead of spinning.

libgomp's threads spin for a while at every barrier before they sleep. On a machine whose cores are
all taken (other programs, DataLoader workers, several ranks), a spinning thread holds a core that
the thread everyone waits for needs, and each operator's barrier can cost a scheduler slice.
``OMP_WAIT_POLICY=PASSIVE``, read by the OpenMP runtime when torch loads it, makes them sleep at
once. It must be in the environment before Python starts: the launcher gives it to the patched
arm's processes only (``env:`` knob); the agent checks that the script had it. No bound: what the
spinning costs beyond a fair share of the cores is not in the baseline's numbers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection
from advisors.fixes.context import ScriptContext
from advisors.verdict import Bottleneck
from profilers.run.script_spec import ENV_KNOB
from profilers.telemetry.threads import ThreadUse

VARIABLE, PASSIVE = "OMP_WAIT_POLICY", "PASSIVE"
KNOB = ENV_KNOB + VARIABLE


def _passive(ctx: ScriptContext) -> dict[str, Any] | None:
    """``OMP_WAIT_POLICY=PASSIVE`` for a run whose intra-op threads waited as the runtime chose (its
    environment named no policy, or an active one); nothing for one thread or a run already passive."""
    t = ctx.threads
    if t is None or t.intra_op < 2:
        return None
    if str(t.env.get(VARIABLE, "")).upper() == PASSIVE:
        return None
    return {KNOB: PASSIVE}


_THREADED = replace(ON_CPU, threads=ThreadUse(intra_op=4, cpu_count=4, affinity=4))

FIX = FixSpec(
    id="omp_passive_waits",
    title="Passive OpenMP waits",
    bottleneck=Bottleneck.HOST,
    applies_to="any",
    explanation="Waiting OpenMP threads sleep at once instead of spinning, so on busy cores they "
    "do not hold the core the thread everyone waits for needs.",
    snippet="OMP_WAIT_POLICY=PASSIVE python train.py   # in the environment before Python starts",
    docs="https://gcc.gnu.org/onlinedocs/libgomp/OMP_005fWAIT_005fPOLICY.html",
    effort="config",
    follows=("set_num_threads",),
    injection=Injection(_passive, KNOB),
    examples=(
        FixExample(_THREADED, knobs={KNOB: PASSIVE}),
        FixExample(
            replace(
                ON_CPU,
                threads=ThreadUse(intra_op=4, cpu_count=4, affinity=4, env={VARIABLE: "passive"}),
            ),
            knobs={},
        ),  # already passive: nothing to try
        FixExample(
            replace(ON_CPU, threads=ThreadUse(intra_op=1, cpu_count=4, affinity=4)), knobs={}
        ),  # one thread waits for nobody
        FixExample(ON_CPU, knobs={}),  # no thread record: nothing to choose from
    ),
)
