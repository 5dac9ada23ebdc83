"""MEM002 — the run stopped out of memory."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule
from advisors.rules.memory.activations import activation_evidence, with_clause
from advisors.synthetic import observation, run_facts
from profilers.run.run_config import RunConfig


class OutOfMemory(Rule):
    """A stored run whose status is ``out_of_memory``: the whole run is at stake (severity 1), whatever the
    trace says — and there is often no trace, because the run stopped before the profiler exported one.

    Evidence: the peak the run reached, its budget, the steps done before it stopped, the error text;
    with a per-module record (a run that stopped after its profiled steps), the layers keeping the
    most activation memory, the first of them named in the message.
    Thresholds: ``confidence`` (0.95) — the status is a fact; the remaining doubt is about the remedy.

    Fix: a smaller micro-batch with gradient accumulation; if the run already accumulates, activation
    checkpointing (recompute activations in backward instead of keeping them).
    """

    id, name, bottleneck = "MEM002", "out-of-memory", Bottleneck.MEMORY
    cause = "capacity"
    thresholds = {"confidence": 0.95}
    fix_id = "grad_accumulation"
    fires = (
        Example(
            "run stopped out of memory at 2100 MB of a 2048 MB budget, no trace",
            lambda: observation(
                no_trace=True,
                run=run_facts(
                    "out_of_memory",
                    peak_memory_mb=2100.0,
                    memory_budget_mb=2048.0,
                    steps_done=0,
                    error="RSS passed the memory budget",
                ),
            ),
            fix="grad_accumulation",
            severity=1.0,
        ),
    )
    passes = (
        Example("run finished ok", lambda: observation(no_trace=True, run=run_facts("ok"))),
        Example("uploaded trace, no run", lambda: observation({"gpu_compute": 0.9})),
    )

    def missing(self, f: Facts) -> str | None:
        return (
            None if f.run else "not a stored run: there is no run status to check for out-of-memory"
        )

    def check(self, f: Facts) -> Finding | None:
        run = f.run
        if run is None or run.status != "out_of_memory":
            return None
        fix = _remedy(run.spec)
        peak = (
            f"{run.peak_memory_mb:.0f} MB" if run.peak_memory_mb is not None else "an unknown peak"
        )
        budget = f" of a {run.memory_budget_mb:.0f} MB budget" if run.memory_budget_mb else ""
        return self.finding(
            f,
            severity=1.0,
            confidence=self.t["confidence"],
            message=with_clause(
                f"The run ran out of memory at {peak}{budget} after {run.steps_done} steps",
                ": "
                + (
                    "accumulate gradients over smaller micro-batches."
                    if fix == "grad_accumulation"
                    else "checkpoint activations so backward recomputes them."
                ),
                f,
            ),
            evidence={
                "status": run.status,
                "peak_memory_mb": run.peak_memory_mb,
                "memory_budget_mb": run.memory_budget_mb,
                "steps_done": run.steps_done,
                "error": run.error,
                **activation_evidence(f),
            },
            fix_id=fix,
        )


def _remedy(spec: RunConfig | None) -> str:
    if spec is not None and spec.grad_accum_steps > 1 and not spec.activation_checkpointing:
        return "activation_checkpointing"
    return "grad_accumulation"
