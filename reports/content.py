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
from advisors.experiments.experiment import Experiment
from advisors.experiments.optimize import Ladder
from advisors.experiments.trials import Spec
from advisors.verdict import Bottleneck, Finding
from profilers.trace.breakdown import CATEGORIES
from profilers.trace.memory_snapshot import snapshot_json
from reports import advice, outcomes
from reports import experiment as ex
from reports.compare import Comparison, step_samples
from reports.evidence import format_evidence

TOP_ROWS = 20
REPORT_SCHEMA = 1


def _num(v: Any, nd: int = 4) -> Any:
    if isinstance(v, float):
        return round(v, nd) if math.isfinite(v) else None
    return v


def _rows(table: Any, cols: dict[str, str], n: int = TOP_ROWS) -> list[dict[str, Any]]:
    if table is None or not len(table):
        return []
    return [{out: _num(getattr(r, col)) for out, col in cols.items()} for r in table.head(n).itertuples()]


def _finding(f: Finding) -> dict[str, Any]:
    fix = advice.fix_for(f.fix_id)
    return {"rule": f.rule, "name": f.name, "bottleneck": f.bottleneck.value, "severity": f.severity,
            "upper_bound_speedup": f.upper_bound_speedup, "confidence": f.confidence,
            "message": f.message, "evidence": dict(f.evidence),
            "fix": None if fix is None else {"id": fix.id, "title": fix.title, "explanation": fix.explanation,
                                             "snippet": fix.snippet},
            "rules": [_finding(m) for m in f.related]}


def findings(a: Analysis) -> list[dict[str, Any]]:
    """The findings, binding first, each one cause: its fix (title, explanation, snippet) when it proposes one,
    the most that fix could gain (``upper_bound_speedup``), and the other rules that saw the same time."""
    d = a.diagnosis
    if d is None:
        return []
    out = [_finding(f) for f in d.findings]
    for f, doc in zip(d.findings, out):
        if f is d.binding:  # its confidence as the header states it: one number for one finding
            doc["verdict_confidence"] = d.confidence
    return out


def report_context(a: Analysis, comparison: Comparison | None = None, experiment: Experiment[Spec] | None = None,
                   ladder: Ladder[Spec] | None = None) -> dict[str, Any]:
    """Everything the HTML and Markdown templates show (``experiment``: an applied fix's A/B result;
    ``ladder``: an ``advisors.experiments.optimize.Ladder``)."""
    b, d = a.breakdown, a.diagnosis
    per_cat = (a.summary or {}).get("breakdown", {})  # ms per step and share of each category, as --json says them
    run = a.run
    return {
        "label": a.label, "kind": a.kind, "headline": a.headline, "advisor_note": a.advisor_note,
        "meta": None if b is None else {
            "device": b.device, "device_name": b.device_name, "device_label": b.device_label, "ranks": a.n_ranks, "steps": b.n_steps,
            "step_time_ms": _num(a.step_time_ms), "profiled_step_time_ms": _num(a.profiled_step_time_ms),
            "step_time_basis": a.step_time_basis, "events": a.n_events,
            "gpu_busy": None if b.device != "gpu" else round(b.gpu_busy_share, 4)},
        "verdict": None if d is None or d.binding is None else {
            "bottleneck": d.bottleneck.value, "message": d.binding.message, "confidence": d.confidence},
        "evidence": [] if d is None else format_evidence(d.evidence),
        "findings": findings(a),
        # a note of no class is about the measurement itself (other programs' load, …): said apart, never as
        # "none: …" under "Not enough data to judge" (dashboard walk)
        "caveats": [] if d is None else [n.reason for n in d.notes if n.bottleneck is Bottleneck.NONE],
        "not_judged": [] if d is None else [{"bottleneck": n.bottleneck.value, "reason": n.reason,
                                            "whole_class": n.whole_class} for n in d.notes
                                            if n.bottleneck is not Bottleneck.NONE],
        "shares": [{"category": c, "ms": round(per_cat[c]["ms"], 3), "share": round(per_cat[c]["share"], 4)}
                   for c in CATEGORIES if c in per_cat and per_cat[c]["ms"]],
        "kernels": _rows(b.kernels if b is not None else None, {"name": "name", "class": "kclass", "count": "count",
                                                              "total_ns": "total_ns", "mean_us": "mean_us"}),
        "ops": _rows(b.ops if b is not None else None, {"name": "name", "count": "count", "total_ns": "total_ns",
                                                       "mean_us": "mean_us"}),
        "run": None if run is None else {
            "status": run.status, "error": run.error, "steps_done": run.steps_done, "planned_steps": run.planned_steps,
            "step_time_ms": run.step_time_ms, "samples_per_s": run.samples_per_s,
            "peak_memory_mb": run.peak_memory_mb, "final_loss": run.final_loss, "device": run.device,
            "telemetry_source": run.telemetry_source,
            "spec": run.spec.to_dict() if run.spec is not None else None},
        "snapshot": None if a.snapshot is None else snapshot_json(a.snapshot, a.device_memory_bytes),
        "notes": list(a.notes), "warnings": list(a.warnings),
        "comparison": None if comparison is None else comparison_context(comparison),
        "experiment": None if experiment is None else experiment_context(experiment, advice.upper_bound(d, experiment)),
        "ladder": None if ladder is None else ladder_context(ladder),
        "job": None if a.job is None else job_context(a.job),
    }


def job_context(job: dict[str, Any]) -> dict[str, Any]:
    """The report's Ranks section from ``analyze``'s ``job`` (a folder's map and reduce, or a run's agent
    summaries): how many ranks, which kept a trace, the straggler and the slowest rank's critical path."""
    straggler = job.get("straggler")
    cp = job.get("critical_path")
    return {"ranks": len(job["ranks"]), "traced": job.get("traced_ranks"),
            "straggler": None if straggler is None else {
                "rank": straggler["culprit"], "work_ms": straggler["work_ms"],
                "median_work_ms": straggler["median_work_ms"], "victims": len(straggler["victims"])},
            "critical_path": None if not cp else {
                "rank": cp["rank"], "available": cp["available"], "reason": cp.get("reason"),
                "step": cp.get("step"), "total_ms": cp.get("total_ms"), "by_kind": cp.get("by_kind") or []}}


def experiment_context(e: Experiment[Spec], upper_bound: float | None = None) -> dict[str, Any]:
    """An applied fix: its title and snippet, the verdict and the numbers it rests on, the diagnosis' upper
    bound on what the fix could gain (for the measured ratio to be read against); for a script, ``where``
    (file:line) and ``change`` (the diff or the snippet at the line, for a kept fix)."""
    s = ex.summary(e)
    script = ex.script_change(e) or {}
    ratio = s["median_ratio"]
    return {"fix": e.fix.title, "snippet": e.fix.snippet, "kept": e.kept, "reason": e.reason,
            "outcome": outcomes.outcome(e.kept, e.reason, s["not_applied"], s["speedup"]),
            "median_change": None if not ratio else f"{ratio:.2f}× shorter" if ratio >= 1 else
            f"{1 / ratio:.2f}× longer",  # never "0.28× shorter" for a step that got 3.6 times longer
            "verdict": s["verdict"], "not_applied": s["not_applied"], "injected": s["injected"],
            "before_ms": _num(s["before_ms"]), "after_ms": _num(s["after_ms"]), "speedup": _num(s["speedup"]),
            "median_ratio": _num(s["median_ratio"]), "before_samples_per_s": _num(s["before_samples_per_s"]),
            "after_samples_per_s": _num(s["after_samples_per_s"]),
            "low": _num(s["low"]), "high": _num(s["high"]), "level": s["level"], "trials": s["trials"],
            "upper_bound": _num(upper_bound), "spec_change": {k: str(v) for k, v in s["spec_change"].items()},
            "where": script.get("where"), "change": script.get("change")}


def ladder_context(ladder: Ladder[Spec]) -> dict[str, Any]:
    """An optimisation ladder: every attempt with its verdict (and, on a script, where and the change), the total
    speed-up of the kept fixes, and the fixes left to you."""
    changes = {(c["round"], c["fix_id"]): c for c in ex.ladder_changes(ladder)}
    rungs = []
    for r in ladder.rungs:
        e = r.experiment
        s = ex.summary(e)
        c = changes.get((r.round, e.fix.id), {})
        rungs.append({"round": r.round, "bottleneck": r.bottleneck, "fix": e.fix.title,
                      "verdict": outcomes.outcome(e.kept, e.reason, s["not_applied"], s["speedup"]),
                      "reason": e.reason, "before_ms": _num(s["before_ms"]), "after_ms": _num(s["after_ms"]),
                      "before_samples_per_s": _num(s["before_samples_per_s"]),
                      "after_samples_per_s": _num(s["after_samples_per_s"]),
                      "speedup": _num(s["speedup"]), "low": _num(s["low"]), "high": _num(s["high"]),
                      "cumulative": _num(r.cumulative) if e.kept else None,
                      "where": c.get("where"), "change": c.get("change")})
    return {"total_speedup": _num(ladder.total_speedup), "rungs": rungs, "advice": ex.ladder_advice(ladder),
            "trials": ladder.rungs[0].experiment.policy.trials if ladder.rungs else None}


def comparison_context(c: Comparison) -> dict[str, Any]:
    return {"label_a": c.label_a, "label_b": c.label_b, "speedup": None if c.speedup is None else round(c.speedup, 3),
            "categories": [{k: _num(v) for k, v in r.items()} for r in c.categories.to_dict("records")],
            "kernels": [{k: _num(v) for k, v in r.items()} for r in c.kernels.to_dict("records")],
            "ops": [{k: _num(v) for k, v in r.items()} for r in c.ops.to_dict("records")]}


def report_json(a: Analysis, comparison: Comparison | None = None, experiment: Experiment[Spec] | None = None,
                ladder: Ladder[Spec] | None = None) -> dict[str, Any]:
    """The JSON export: the breakdown summary (the ``analyze --json`` facts), the advisor's diagnosis, the
    run's facts and per-step samples, and the comparison, the applied fix and the ladder when given (on a
    script, each with ``where`` and ``change``)."""
    ctx = report_context(a, comparison, experiment, ladder)
    return {
        "stepwise_report": REPORT_SCHEMA, "generated_unix": round(time.time(), 3), "label": a.label, "kind": a.kind,
        "headline": a.headline, "step_time_ms": _num(a.step_time_ms),
        "profiled_step_time_ms": _num(a.profiled_step_time_ms), "step_time_basis": a.step_time_basis,
        "summary": None if a.summary is None else {**a.summary, "step_time_ms": _num(a.step_time_ms),
                                                   "profiled_step_time_ms": _num(a.profiled_step_time_ms)},
        "diagnosis": None if a.diagnosis is None else diagnosis_json(a.diagnosis),
        "advisor_note": a.advisor_note, "findings": ctx["findings"], "run": ctx["run"],
        "step_ms": list(step_samples(a)), "notes": ctx["notes"], "warnings": ctx["warnings"],
        "comparison": ctx["comparison"], "memory_snapshot": ctx["snapshot"],
        "experiment": None if experiment is None else {
            **advice.experiment_json(experiment),
            "upper_bound_speedup": ctx["experiment"]["upper_bound"],
            **{k: ctx["experiment"][k] for k in ("verdict", "not_applied", "where", "change")}},
        "ladder": None if ladder is None else advice.ladder_json(ladder),
        "job": a.job,  # the same ``job`` as ``analyze --json`` (a folder of ranks, or a run's agent summaries)
    }
