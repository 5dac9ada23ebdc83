"""The parts of the ``analyze --json`` document (``Analysis.to_json()``) that are not the diagnosis'
(:func:`advisors.diagnosis.diagnosis_json`) or the breakdown's (:func:`profilers.trace.summary.breakdown_summary`):
a run's facts, the summary of an input with no trace, an empty efficiency, a folder's ``job``. Its fields are a
contract (docs/reference/cli.md, "analyze --json").
"""

from __future__ import annotations

from typing import Any, Sequence

from advisors.observation import RunFacts
from profilers.trace.breakdown import CATEGORIES
from profilers.trace.memory_snapshot import MemorySnapshot

#: ``efficiency`` when there is nothing to measure
NO_EFFICIENCY = {
    "achieved_tflops": None,
    "peak_tflops": None,
    "peak_basis": None,
    "mfu": None,
    "flops_source": "none",
    "reason": "no profiled steps: nothing to measure",
}


def no_trace_summary(
    run: RunFacts | None, snapshot: MemorySnapshot | None, notes: Sequence[str]
) -> dict[str, Any]:
    """The summary fields for a run that left no trace, or a memory snapshot (zero step time to attribute)."""
    device = run.device if run is not None else ("cuda" if snapshot is not None else None)
    return {
        "device": device or "unknown",
        "device_name": device or "unknown",
        "ranks": [],
        "steps": run.steps_done if run else 0,
        "steps_inferred": False,
        "step_time_ms": (run.step_time_ms if run else None) or 0.0,
        "breakdown": {c: {"ms": 0.0, "share": 0.0} for c in CATEGORIES},
        "warnings": list(notes),
    }


def run_json(run: RunFacts) -> dict[str, Any]:
    """A stored run's facts as ``analyze --json`` gives them (``run``)."""
    return {
        "status": run.status,
        "error": run.error,
        "steps_done": run.steps_done,
        "step_time_ms": run.step_time_ms,
        "step_time_steps": run.step_time_steps,
        "step_time_basis": run.step_time_basis,
        "samples_per_s": run.samples_per_s,
        "typical_step_ms": run.typical_step_ms,
        "stalled_share": run.stalled_share,
        "peak_memory_mb": run.peak_memory_mb,
        "memory_budget_mb": run.memory_budget_mb,
        "final_loss": run.final_loss,
        "workload": run.spec.workload if run.spec else None,
        "telemetry": run.telemetry.as_dict() if run.telemetry is not None else None,
        # the profiler's own cost apart from the script's
        "peak_memory_unprofiled_mb": run.peak_memory_unprofiled_mb,
        "peak_memory_profiled_mb": run.peak_memory_profiled_mb,
        "profile_cut": run.profile_cut,
        "observed_to_end": run.stopped_after is None,
    }


def job_json(
    views: dict[str, Any], engine: str | None, summaries: int, cached: int
) -> dict[str, Any]:
    """A folder of ranks' ``job``: its cross-rank views, where they were read (``engine``) and from how many
    summaries (how many from the cache)."""
    return {
        **views,
        "engine": engine or "local",
        "summaries": summaries,
        "summaries_cached": cached,
    }
