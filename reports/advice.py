"""The advisor as the reports see it: a diagnosis when the advisor can give one, else an honest reason.

The advisor (``advisors.diagnosis``) is developed alongside the dashboard; until its entry point exists every
caller gets ``None`` and :data:`ADVISOR_MISSING`, and pages say so — a result is never faked.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from advisors.verdict import Diagnosis
from advisors.observation import Observation
from profilers.errors import StepwiseError

ADVISOR_MISSING = "advisor not available yet: advisors.diagnosis.diagnose does not exist in this build"


def _attr(module: str, name: str) -> Any | None:
    try:
        return getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None


def diagnose_fn() -> Callable[[Observation], Diagnosis] | None:
    """``advisors.diagnosis.diagnose`` when it exists."""
    return _attr("advisors.diagnosis", "diagnose")


def diagnose(obs: Observation) -> tuple[Diagnosis | None, str | None]:
    """``(diagnosis, None)``, or ``(None, why)`` when the advisor is missing or cannot judge the input."""
    fn = diagnose_fn()
    if fn is None:
        return None, ADVISOR_MISSING
    try:
        return fn(obs), None
    except StepwiseError as err:
        return None, f"the advisor could not judge this input: {err}"


def fix_for(fix_id: str | None) -> Any | None:
    """The :class:`~advisors.verdict.Fix` a finding proposes, from ``advisors.fixes.FIXES``."""
    fixes = _attr("advisors.fixes", "FIXES") or {}
    return fixes.get(fix_id) if fix_id else None


def diagnosis_json(d: Diagnosis) -> dict[str, Any]:
    """The advisor's own JSON form of a diagnosis (``advisors.diagnosis.diagnosis_json``)."""
    fn = _attr("advisors.diagnosis", "diagnosis_json")
    if fn is not None:
        return fn(d)
    return {"bottleneck": d.bottleneck.value, "confidence": d.confidence, "findings": [], "evidence": dict(d.evidence)}


def upper_bound(d: Diagnosis | None, e: Any) -> float | None:
    """The diagnosis' upper bound on what experiment ``e``'s fix could gain (``advisors.diagnosis.upper_bound_for``)."""
    fn = _attr("advisors.diagnosis", "upper_bound_for")
    return fn(d, e.fix.id) if fn is not None and d is not None else None


def cause_text(cause: str) -> str:
    """What a rule's cause is (``advisors.accounting.CAUSES``), or the cause's name when that table is missing."""
    causes = _attr("advisors.accounting", "CAUSES") or {}
    return causes[cause][1] if cause in causes else cause


def rule_docs() -> list[dict[str, Any]] | None:
    """Every rule's documentation (``Rule.doc()``), in ``RULES`` order; None while the rules are missing."""
    rules = _attr("advisors.rules", "RULES")
    if not rules:
        return None
    return [r.doc() for r in rules]


def experiment_json(e: Any, fallback: dict[str, Any]) -> dict[str, Any]:
    """The advisor's JSON form of an experiment (``advisors.experiments.ladder_report.experiment_json``), else ``fallback``."""
    fn = _attr("advisors.experiments.ladder_report", "experiment_json")
    return fn(e) if fn is not None else fallback


def ladder_json(ladder: Any, fallback: dict[str, Any]) -> dict[str, Any]:
    """The advisor's JSON form of a ladder (``advisors.experiments.ladder_report.ladder_json``: the ``optimize --json``
    contract, with ``where`` and ``change`` per round on a script), else ``fallback``."""
    from reports.experiment import arm_device

    fn = _attr("advisors.experiments.ladder_report", "ladder_json")
    if fn is None:
        return fallback
    device = arm_device(ladder.rungs[0].experiment.patched) if ladder.rungs else "cpu"
    return fn(ladder, device)
