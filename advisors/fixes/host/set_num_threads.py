"""Intra-op threads to the free cores: no more threads than the cores other programs left free."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from advisors.fit import threads_for
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


_BUSY = replace(ON_CPU, threads=ThreadUse(intra_op=4, local_processes=1, cpu_count=4, affinity=4), other_cores=2.0)

FIX = FixSpec(
    id="set_num_threads", title="Intra-op threads to the free cores", bottleneck=Bottleneck.HOST, applies_to="any",
    explanation="One intra-op thread per free core: more threads than cores other programs left free wait for one "
    "another at every operator's barrier.",
    snippet="torch.set_num_threads(n)   # n = free cores / training processes on this machine, before training\n"
    "# or for the script and the processes it starts:  OMP_NUM_THREADS=n python train.py",
    docs="https://pytorch.org/docs/stable/generated/torch.set_num_threads.html", effort="config",
    injection=Injection(_threads, "num_threads"),
    examples=(FixExample(_BUSY, knobs={"num_threads": 2}),  # 4 threads, 2 of 4 cores taken by others
              FixExample(ON_CPU, knobs={})))  # no thread record: nothing to choose from
