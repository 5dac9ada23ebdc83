"""The ``analyze --json`` document of an :class:`~advisors.analysis.value.Analysis`: ``Analysis.to_json()``.

Facts (the breakdown summary, or a run's own figures when it left no trace, or a memory snapshot's summary), the
run's facts, the efficiency, the diagnosis (findings with their bounds, the fix order, what could not be judged)
and, for several ranks, ``job``: the cross-rank views. Its fields are a contract (README, "analyze --json").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from advisors.diagnosis import diagnosis_json
from advisors.observation import RunFacts
from profilers.errors import StepwiseError
from profilers.trace.breakdown import CATEGORIES
from profilers.trace.memory_snapshot import MemorySnapshot, snapshot_json
from profilers.trace.summary import breakdown_summary

if TYPE_CHECKING:
    from advisors.analysis.value import Analysis

#: ``efficiency`` when there is nothing to measure
NO_EFFICIENCY = {"achieved_tflops": None, "peak_tflops": None, "peak_basis": None, "mfu": None,
                 "flops_source": "none", "reason": "no profiled steps: nothing to measure"}


def analysis_json(a: Analysis) -> dict[str, Any]:
    """The document; StepwiseError (the advisor's reason) when the advisor could not judge the input."""
    if a.diagnosis is None:
        raise StepwiseError(a.advisor_note or "the advisor could not judge this input")
    b, run = a.breakdown, a.run
    out = breakdown_summary(b) if b is not None else _no_trace_summary(run, a.snapshot, a.notes)
    # One step time per input (Analysis.step_time_ms): a run's own median measured step; the profiled window's
    # median beside it.
    out["profiled_step_time_ms"] = out["step_time_ms"] if b is not None and b.n_steps else None
    if run is not None and run.step_time_ms is not None:
        out["step_time_ms"] = round(run.step_time_ms, 4)
    if run is not None:
        out["run"] = run_json(run)
    if a.snapshot is not None:
        out["memory_snapshot"] = snapshot_json(a.snapshot, a.device_memory_bytes)
    out["efficiency"] = a.efficiency.to_json() if a.efficiency is not None else dict(NO_EFFICIENCY)
    out.update(diagnosis_json(a.diagnosis))
    if a.job is not None:  # a folder's map and reduce, or a run's agent summaries: the views of every rank
        out["job"] = a.job
    return out


def _no_trace_summary(run: RunFacts | None, snapshot: MemorySnapshot | None, notes: Sequence[str]) -> dict[str, Any]:
    """The summary fields for a run that left no trace, or a memory snapshot (zero step time to attribute)."""
    device = run.device if run is not None else ("cuda" if snapshot is not None else None)
    return {"device": device or "unknown", "device_name": device or "unknown", "ranks": [],
            "steps": run.steps_done if run else 0, "steps_inferred": False,
            "step_time_ms": (run.step_time_ms if run else None) or 0.0,
            "breakdown": {c: {"ms": 0.0, "share": 0.0} for c in CATEGORIES}, "warnings": list(notes)}


def run_json(run: RunFacts) -> dict[str, Any]:
    """A stored run's facts as ``analyze --json`` gives them (``run``)."""
    return {"status": run.status, "error": run.error, "steps_done": run.steps_done,
            "step_time_ms": run.step_time_ms, "step_time_steps": run.step_time_steps,
            "step_time_basis": run.step_time_basis, "samples_per_s": run.samples_per_s,
            "peak_memory_mb": run.peak_memory_mb, "memory_budget_mb": run.memory_budget_mb,
            "final_loss": run.final_loss, "workload": run.spec.workload if run.spec else None,
            "telemetry": run.telemetry.as_dict() if run.telemetry is not None else None,
            # the profiler's own cost apart from the script's (issue 29 item 6)
            "peak_memory_unprofiled_mb": run.peak_memory_unprofiled_mb,
            "peak_memory_profiled_mb": run.peak_memory_profiled_mb, "profile_cut": run.profile_cut,
            "observed_to_end": run.stopped_after is None}


def job_json(views: dict[str, Any], engine: str | None, summaries: int, cached: int) -> dict[str, Any]:
    """A folder of ranks' ``job``: its cross-rank views, where they were read (``engine``) and from how many
    summaries (how many from the cache)."""
    return {**views, "engine": engine or "local", "summaries": summaries, "summaries_cached": cached}
