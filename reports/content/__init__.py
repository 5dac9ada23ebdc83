"""What a report says, as plain values: the context the templates render and the JSON export.

One place decides the content (verdict, findings with their fixes, breakdown, top kernels and ops, the run's
facts, an optional A-vs-B comparison, an applied fix or an optimisation ladder — for a script, with where in
the user's file the change belongs and the diff); the templates only lay it out. Strings are left raw here — escaping
is the template's job (jinja2 autoescape for HTML, the ``md`` filter for Markdown).
"""

from __future__ import annotations

import math
import time
from typing import Any

from advisors.analysis import Analysis
from advisors.diagnosis import diagnosis_json
from advisors.experiments.results.record import ExperimentRecord, LadderRecord
from advisors.experiments.results.stored_view import StoredView
from advisors.verdict import Bottleneck, Finding
from profilers.trace.breakdown import CATEGORIES
from profilers.trace.memory_snapshot import snapshot_json
from reports import advice
from reports.compare import Comparison, step_samples
from reports.evidence import format_evidence

TOP_ROWS = 20
REPORT_SCHEMA = 1


def _num(v: Any, nd: int = 4) -> Any:
    if isinstance(v, float):
        return round(v, nd) if math.isfinite(v) else None
    return v


def _ms(v: Any) -> Any:
    """A run's time per step as the run recorded it, unrounded: the JSON holds the number every page rounds."""
    return v if not isinstance(v, float) or math.isfinite(v) else None


def _rows(table: Any, cols: dict[str, str], n: int = TOP_ROWS) -> list[dict[str, Any]]:
    if table is None or not len(table):
        return []
    return [
        {out: _num(getattr(r, col)) for out, col in cols.items()}
        for r in table.head(n).itertuples()
    ]


def _finding(a: Analysis, f: Finding) -> dict[str, Any]:
    fix = advice.fix_for(f.fix_id, a.diagnosis)
    bound = a.bound_of(f)  # the bound an Apply of the fix shows too
    return {
        "rule": f.rule,
        "name": f.name,
        "bottleneck": f.bottleneck.value,
        "severity": f.severity,
        "upper_bound_speedup": bound.speedup if bound is not None else None,
        "confidence": f.confidence,
        "message": f.message,
        "evidence": dict(f.evidence),
        "fix": None
        if fix is None
        else {
            "id": fix.id,
            "title": fix.title,
            "explanation": fix.explanation,
            "snippet": fix.snippet,
        },
        "rules": [_finding(a, m) for m in f.related],
    }


def findings(a: Analysis) -> list[dict[str, Any]]:
    """The findings, binding first, each one cause: its fix (title, explanation, snippet) when it proposes one,
    the most that fix could gain (``upper_bound_speedup``), and the other rules that saw the same time."""
    d = a.diagnosis
    if d is None:
        return []
    out = [_finding(a, f) for f in d.findings]
    for f, doc in zip(d.findings, out):
        if f is d.binding:  # its confidence as the header states it: one number for one finding
            doc["verdict_confidence"] = d.confidence
    return out


def report_context(
    a: Analysis,
    comparison: Comparison | None = None,
    experiment: StoredView | None = None,
    ladder: LadderRecord | None = None,
) -> dict[str, Any]:
    """Everything the HTML and Markdown templates show (``experiment``: an applied fix's stored record;
    ``ladder``: a ladder's record)."""
    b, d = a.breakdown, a.diagnosis
    per_cat = (a.summary or {}).get(
        "breakdown", {}
    )  # ms per step and share of each category, as --json says them
    run = a.run
    return {
        "label": a.label,
        "kind": a.kind,
        "headline": a.headline,
        "advisor_note": a.advisor_note,
        "meta": None
        if b is None
        else {
            "device": b.device,
            "device_name": b.device_name,
            "device_label": b.device_label,
            "ranks": a.n_ranks,
            "steps": b.n_steps,
            "step_time_ms": _ms(a.step_time_ms),
            "profiled_step_time_ms": _ms(a.profiled_step_time_ms),
            "step_time_basis": a.step_time_basis,
            "events": a.n_events,
            "gpu_busy": None if b.device != "gpu" else round(b.gpu_busy_share, 4),
        },
        "verdict": None
        if d is None or d.binding is None
        else {
            "bottleneck": d.bottleneck.value,
            "message": d.binding.message,
            "confidence": d.confidence,
        },
        "evidence": [] if d is None else format_evidence(d.evidence),
        "findings": findings(a),
        # a note of no class is about the measurement itself (other programs' load, …): said apart, never as
        # "none: …" under "Not enough data to judge"
        "caveats": []
        if d is None
        else [n.reason for n in d.notes if n.bottleneck is Bottleneck.NONE],
        "not_judged": []
        if d is None
        else [
            {"bottleneck": n.bottleneck.value, "reason": n.reason, "whole_class": n.whole_class}
            for n in d.notes
            if n.bottleneck is not Bottleneck.NONE
        ],
        "shares": [
            {
                "category": c,
                "ms": round(per_cat[c]["ms"], 3),
                "share": round(per_cat[c]["share"], 4),
            }
            for c in CATEGORIES
            if c in per_cat and per_cat[c]["ms"]
        ],
        "kernels": _rows(
            b.kernels if b is not None else None,
            {
                "name": "name",
                "class": "kclass",
                "count": "count",
                "total_ns": "total_ns",
                "mean_us": "mean_us",
            },
        ),
        "ops": _rows(
            b.ops if b is not None else None,
            {"name": "name", "count": "count", "total_ns": "total_ns", "mean_us": "mean_us"},
        ),
        "run": None
        if run is None
        else {
            "status": run.status,
            "error": run.error,
            "steps_done": run.steps_done,
            "planned_steps": run.planned_steps,
            "step_time_ms": run.step_time_ms,
            "samples_per_s": run.samples_per_s,
            "peak_memory_mb": run.peak_memory_mb,
            "final_loss": run.final_loss,
            "device": run.device,
            "telemetry_source": run.telemetry_source,
            "spec": run.spec.to_dict() if run.spec is not None else None,
        },
        "snapshot": None
        if a.snapshot is None
        else snapshot_json(a.snapshot, a.device_memory_bytes),
        "notes": list(a.notes),
        "warnings": list(a.warnings),
        "comparison": None if comparison is None else comparison_context(comparison),
        "experiment": None
        if experiment is None or experiment.record is None
        else experiment_context(experiment.record),
        "ladder": None if ladder is None else ladder_context(ladder),
        "job": None
        if a.job is None
        else job_context(a.job, d.bottleneck.value if d is not None else None),
    }


def job_context(job: dict[str, Any], bottleneck: str | None = None) -> dict[str, Any]:
    """The report's Ranks section from ``analyze``'s ``job`` (a folder's map and reduce, or a run's agent
    summaries): how many ranks, which kept a trace, the straggler (or why none is marked: the sentence of
    :mod:`profilers.jobs.straggler`), the critical path of the rank of most work, its kinds in words, and how it
    fits the ``bottleneck`` (:func:`~profilers.jobs.path_fit.path_fit`)."""
    from profilers.jobs.critical_graph import KIND_WORDS
    from profilers.jobs.path_fit import path_fit

    straggler = job.get("straggler")
    cp = job.get("critical_path")
    return {
        "ranks": len(job["ranks"]),
        "traced": job.get("traced_ranks"),
        "straggler_reason": job.get("straggler_reason"),
        "straggler": None
        if straggler is None
        else {
            "rank": straggler["culprit"],
            "work_ms": straggler["work_ms"],
            "median_work_ms": straggler["median_work_ms"],
            "victims": len(straggler["victims"]),
        },
        "path_fit": path_fit(job, bottleneck),
        "critical_path": None
        if not cp
        else {
            "rank": cp["rank"],
            "available": cp["available"],
            "reason": cp.get("reason"),
            "step": cp.get("step"),
            "total_ms": cp.get("total_ms"),
            "by_kind": [
                {**k, "words": KIND_WORDS.get(k["kind"], k["kind"])}
                for k in cp.get("by_kind") or []
            ],
        },
    }


def experiment_context(x: ExperimentRecord) -> dict[str, Any]:
    """An applied fix, from its record: its title and snippet, the outcome word and the numbers it rests on, the
    upper bound with the diagnosis it comes from; for a script, ``where`` (file:line) and ``change`` (the diff or
    the snippet at the line, for a kept fix)."""
    return {
        "fix": x.fix_title,
        "snippet": x.snippet,
        "kept": x.outcome == "kept",
        "reason": x.reason,
        "outcome": x.outcome_text,
        "verdict": x.outcome,
        "not_applied": x.not_applied,
        "injected": x.injected,
        "before_ms": _num(x.before_step_ms),
        "after_ms": _num(x.after_step_ms),
        "speedup": _num(x.speedup),
        "before_samples_per_s": _num(x.before_samples_per_s),
        "after_samples_per_s": _num(x.after_samples_per_s),
        "low": _num(x.low),
        "high": _num(x.high),
        "level": x.level,
        "trials": x.runs_per_arm,
        "rate_unit": x.rate_unit,
        "beyond_bound": x.beyond_bound,
        "upper_bound": _num(x.bound.speedup) if x.bound else None,
        "bound_text": x.bound.text if x.bound else None,
        "spec_change": {k: str(v) for k, v in x.spec_change.items()},
        "where": x.where,
        "change": x.change_to_make,
        "memory": memory_context(x),
    }


def memory_context(x: ExperimentRecord) -> dict[str, Any] | None:
    """A memory fix's peaks (MB) and the sentence the terminal prints of them, from its record
    (``None``: no memory was recorded)."""
    m, said = x.memory, x.memory_text
    if m is None or said is None:
        return None
    return {
        "text": said,
        "basis": m.basis,
        "before_allocated_mb": m.before_allocated_mb,
        "after_allocated_mb": m.after_allocated_mb,
        "allocated_change": m.allocated_change,
        "before_peak_mb": m.before_peak_mb,
        "after_peak_mb": m.after_peak_mb,
    }


def ladder_context(lad: LadderRecord) -> dict[str, Any]:
    """An optimisation ladder, from its record: every attempt with its outcome word (and, on a script, where and
    the change), the total speed-up of the kept fixes, why it stopped and the fixes left to you."""
    rungs = [
        {
            "round": x.round,
            "bottleneck": x.bottleneck,
            "fix": x.fix_title,
            "verdict": x.outcome_text,
            "reason": x.reason,
            "before_ms": _num(x.before_step_ms),
            "after_ms": _num(x.after_step_ms),
            "before_samples_per_s": _num(x.before_samples_per_s),
            "after_samples_per_s": _num(x.after_samples_per_s),
            "speedup": _num(x.speedup),
            "low": _num(x.low),
            "high": _num(x.high),
            "upper_bound": _num(x.bound.speedup) if x.bound else None,
            "cumulative": _num(x.cumulative_speedup),
            "beyond_bound": x.beyond_bound,
            "where": x.where,
            "change": x.change_to_make,
            "baseline_moved": x.baseline_moved,
            "memory": x.memory_text,
        }
        for x in lad.rounds
    ]
    return {
        "total_speedup": _num(lad.total_speedup),
        "rungs": rungs,
        "why_stopped": lad.why_stopped,
        "advice": [
            {
                "round": a.round,
                "fix": a.fix_title,
                "fix_id": a.fix_id,
                "why": a.why,
                "snippet": a.snippet,
            }
            for a in lad.advice
        ],
        "trials": lad.rounds[0].runs_per_arm if lad.rounds else None,
    }


def comparison_context(c: Comparison) -> dict[str, Any]:
    return {
        "label_a": c.label_a,
        "label_b": c.label_b,
        "speedup": None if c.speedup is None else round(c.speedup, 3),
        "categories": [{k: _num(v) for k, v in r.items()} for r in c.categories.to_dict("records")],
        "kernels": [{k: _num(v) for k, v in r.items()} for r in c.kernels.to_dict("records")],
        "ops": [{k: _num(v) for k, v in r.items()} for r in c.ops.to_dict("records")],
    }


def report_json(
    a: Analysis,
    comparison: Comparison | None = None,
    experiment: StoredView | None = None,
    ladder: LadderRecord | None = None,
) -> dict[str, Any]:
    """The JSON export: the breakdown summary (the ``analyze --json`` facts), the advisor's diagnosis, the
    run's facts and per-step samples, and the comparison, the applied fix and the ladder when given (on a
    script, each with ``where`` and ``change``)."""
    ctx = report_context(a, comparison, experiment, ladder)
    return {
        "stepwise_report": REPORT_SCHEMA,
        "generated_unix": round(time.time(), 3),
        "label": a.label,
        "kind": a.kind,
        "headline": a.headline,
        "step_time_ms": _ms(a.step_time_ms),
        "profiled_step_time_ms": _ms(a.profiled_step_time_ms),
        "step_time_basis": a.step_time_basis,
        "summary": None
        if a.summary is None
        else {
            **a.summary,
            "step_time_ms": _ms(a.step_time_ms),
            "profiled_step_time_ms": _ms(a.profiled_step_time_ms),
        },
        "diagnosis": None if a.diagnosis is None else diagnosis_json(a.diagnosis),
        "advisor_note": a.advisor_note,
        "findings": ctx["findings"],
        "run": ctx["run"],
        "step_ms": list(step_samples(a)),
        "notes": ctx["notes"],
        "warnings": ctx["warnings"],
        "comparison": ctx["comparison"],
        "memory_snapshot": ctx["snapshot"],
        "experiment": None
        if experiment is None or experiment.record is None
        else experiment.record.to_json(),
        "ladder": None if ladder is None else ladder.to_json(),
        "job": a.job,  # the same ``job`` as ``analyze --json`` (a folder of ranks, or a run's agent summaries)
    }
