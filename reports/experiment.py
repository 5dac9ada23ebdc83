"""An A/B experiment or an optimisation ladder (``advisors.experiments.experiment`` / ``advisors.experiments.optimize``) as chart inputs.

Pure functions from the advisor's values to plain samples, curves and tables; the before/after breakdown
reads each arm's first stored run (its trace) with :func:`advisors.analysis.analyse`. For a fix injected
into a user's script (:class:`~profilers.run.script_spec.ScriptSpec`), :func:`script_change` says where in the
user's file the change belongs and, for a kept fix, the edit itself (``advisors.experiments.ladder_report.change_json``: a
unified diff of the file, or the snippet at the line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from advisors.experiments.experiment import Arm, Experiment
from advisors.experiments.optimize import Ladder
from advisors.experiments.trials import Spec
from profilers.trace.breakdown import CATEGORIES
from profilers.errors import StepwiseError
from profilers.run.script_spec import ScriptSpec
from profilers.store.files import read_json
from advisors.analysis import analyse


def _before(e: Experiment[Spec]) -> Arm[Spec]:
    """The arm the patched one is timed against: the reference when the baseline could not be timed."""
    return e.reference if e.reference is not None else e.baseline


def arms(e: Experiment[Spec]) -> dict[str, Arm[Spec]]:
    return {f"before: {_before(e).label}": _before(e), f"after: {e.fix.title}": e.patched}


def step_samples(e: Experiment[Spec]) -> dict[str, list[float]]:
    """Every measured step time (ms) of each arm, all trials pooled."""
    return {name: [w for t in arm.trials for w in t.walls_ms] for name, arm in arms(e).items()}


def loss_curves(e: Experiment[Spec]) -> dict[str, list[float]]:
    """Median loss per step over each arm's runs (up to the shortest run)."""
    out: dict[str, list[float]] = {}
    for name, arm in arms(e).items():
        curves = [o.losses for o in arm.outcomes if o.losses]
        if curves:
            n = min(len(c) for c in curves)
            out[name] = [float(np.median([c[i] for c in curves])) for i in range(n)]
    return out


def breakdowns(e: Experiment[Spec]) -> dict[str, dict[str, float]]:
    """ms per step by category of each arm's first run that left a readable trace."""
    out: dict[str, dict[str, float]] = {}
    for name, arm in arms(e).items():
        for o in arm.outcomes:
            if not o.run_dir:
                continue
            try:
                a = analyse(Path(o.run_dir))
            except StepwiseError:
                continue
            if a.breakdown is not None and len(a.breakdown.per_step):
                ms = a.breakdown.per_step[list(CATEGORIES)].mean() / 1e6
                out[name] = {c: float(ms[c]) for c in CATEGORIES}
                break
    return out


def median_ratio(before_ms: float | None, after_ms: float | None) -> float | None:
    """Before over after of the arms' median steps (> 1: the patched step is shorter)."""
    return before_ms / after_ms if before_ms and after_ms else None


def summary(e: Experiment[Spec]) -> dict[str, Any]:
    """Headline numbers: the arms' samples/s and the speed-up they give (``after / before``, the ratio that decided,
    with its interval); the arms' median steps and their own ratio, a second statistic shown beside it and never
    in its place; kept and why."""
    before, after = _before(e), e.patched
    return {"before_ms": before.median_step_ms, "after_ms": after.median_step_ms,
            "median_ratio": median_ratio(before.median_step_ms, after.median_step_ms),
            "before_samples_per_s": e.ratio.before if e.ratio else None,
            "after_samples_per_s": e.ratio.after if e.ratio else None, "speedup": e.speedup,
            "pair_ratios": list(e.ratio.pairs) if e.ratio else [], "inconclusive": e.inconclusive,
            "low": e.ratio.low if e.ratio else None, "high": e.ratio.high if e.ratio else None,
            "level": e.policy.level, "kept": e.kept, "reason": e.reason, "trials": e.policy.trials,
            "spec_change": {k: v[1] for k, v in e.spec_changes().items()},
            "verdict": verdict(e), "not_applied": e.not_applied, "injected": is_script(e)}


def is_script(e: Experiment[Spec]) -> bool:
    """True for a fix injected into a user's script (its knobs are injected at boot; the file is never written)."""
    return isinstance(e.patched.spec, ScriptSpec)


def verdict(e: Experiment[Spec]) -> str:
    """``kept``, ``not applied`` (the fix never acted in the patched run: no speed was judged) or ``rejected``."""
    return "kept" if e.kept else "not applied" if e.not_applied else "rejected"


def call_site(e: Experiment[Spec]) -> dict[str, Any] | None:
    """The call in the user's code the fix acts on (its DataLoader, optimizer, model call …), as the launcher
    recorded it in the runs' ``injected.json`` (patched runs first); ``None`` when the fix has no single place."""
    from advisors.experiments.script_fixes import ScriptContext, where_for

    knobs = {k: v[1] for k, v in e.spec_changes().items()}  # what was injected: its framework switch, if any
    for o in (*e.patched.outcomes, *e.baseline.outcomes):
        applied = o.applied or {}
        if applied.get("sites"):
            ctx = ScriptContext(sites=applied["sites"], all_sites=applied.get("all_sites") or {})
            site = where_for(e.fix, ctx, knobs)
            if site is not None and site.get("file") and site.get("line"):
                return site
    return None


def arm_device(arm: Arm[Spec]) -> str:
    """Where an arm's runs executed (``cuda`` or ``cpu``), from its first run's ``result.json``."""
    for o in arm.outcomes:
        result = read_json(Path(o.run_dir) / "result.json") if o.run_dir else None
        if isinstance(result, dict) and result.get("device"):
            return "cuda" if str(result["device"]).startswith("cuda") else "cpu"
    return "cpu"


def script_change(e: Experiment[Spec], where: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """For a fix on a script: ``where`` (``file:line`` or ``None``), ``site`` (the recorded call) and ``change``
    (for a kept fix: ``{kind: diff|snippet, file, line, text}``, else ``None``); ``None`` for a workload.
    ``where`` overrides the call site (a ladder rung knows its own)."""
    if not is_script(e):
        return None
    from advisors.experiments.ladder_report import change_json
    from advisors.experiments.optimize import Rung

    site = where if where is not None else call_site(e)
    change = change_json(Rung(0, e.fix.bottleneck.value, None, e, e.speedup or 1.0, site), arm_device(e.patched)) \
        if e.kept else None
    return {"where": f"{site.get('file')}:{site.get('line')}" if site else None, "site": site, "change": change}


def ladder_changes(ladder: Ladder[Spec]) -> list[dict[str, Any]]:
    """Per rung of a ladder on a script: round, fix, verdict, reason, ``where`` and ``change`` (kept fixes)."""
    out = []
    for r in ladder.rungs:
        c = script_change(r.experiment, r.where)
        if c is not None:
            out.append({"round": r.round, "fix": r.experiment.fix.title, "fix_id": r.experiment.fix.id,
                        "verdict": verdict(r.experiment), "reason": r.experiment.reason, **c})
    return out


def ladder_advice(ladder: Ladder[Spec]) -> list[dict[str, Any]]:
    """The fixes the ladder's diagnoses proposed that you change yourself: title, why, snippet."""
    return [{"round": a.round, "fix": a.fix.title, "fix_id": a.fix.id, "why": a.why, "snippet": a.fix.snippet}
            for a in ladder.advice]


def ladder_frame(ladder: Ladder[Spec]) -> pd.DataFrame:
    """One row per attempted fix: round, bottleneck, fix, before/after ms, speed-up [interval], the diagnosis'
    upper bound on that fix's gain, kept, reason."""
    rows = []
    for r in ladder.rungs:
        e = r.experiment
        s = summary(e)
        rows.append({"round": r.round, "bottleneck": r.bottleneck, "rule": r.rule, "fix": e.fix.title,
                     "before samples/s": s["before_samples_per_s"], "after samples/s": s["after_samples_per_s"],
                     "speed-up": s["speedup"], "before ms": s["before_ms"], "after ms": s["after_ms"],
                     "interval": None if s["low"] is None else f"[{s['low']:.2f}, {s['high']:.2f}]",
                     "upper bound": r.upper_bound,
                     "kept": e.kept, "verdict": verdict(e), "cumulative": r.cumulative, "reason": e.reason})
    return pd.DataFrame(rows)


def ladder_steps(ladder: Ladder[Spec]) -> pd.DataFrame:
    """The ladder chart: ``label, speedup`` — 1 at the start, then the product of the kept fixes' measured
    speed-ups after each (the table's cumulative column): each round re-measures its own baseline, so a chain
    of the arms' step times would mix measurements that were never compared with each other."""
    rows = []
    if ladder.rungs:
        rows.append({"label": "start", "speedup": 1.0})
    for r in ladder.kept:
        rows.append({"label": f"+ {r.experiment.fix.title}", "speedup": r.cumulative})
    return pd.DataFrame(rows, columns=["label", "speedup"])