"""The advisor as the reports see it: a diagnosis, or the honest reason there is none; the rules' documentation
and the fix catalogue; the advisor's own JSON forms of a diagnosis, an experiment and a ladder."""

from __future__ import annotations

from typing import Any

from advisors import diagnosis as advisor
from advisors.accounting import CAUSES
from advisors.experiments import ladder_report
from advisors.experiments.experiment import Experiment
from advisors.experiments.optimize import Ladder
from advisors.experiments.trials import Spec
from advisors.fixes import FIXES
from advisors.observation import Observation
from advisors.rules import RULES
from advisors.verdict import Diagnosis, Fix
from profilers.errors import StepwiseError


def diagnose(obs: Observation) -> tuple[Diagnosis | None, str | None]:
    """``(diagnosis, None)``, or ``(None, why)`` when the advisor cannot judge the input."""
    try:
        return advisor.diagnose(obs), None
    except StepwiseError as err:
        return None, f"the advisor could not judge this input: {err}"


def fix_for(fix_id: str | None) -> Fix | None:
    """The :class:`~advisors.verdict.Fix` a finding proposes (``advisors.fixes.FIXES``); None for no fix."""
    return FIXES.get(fix_id) if fix_id else None


def diagnosis_json(d: Diagnosis) -> dict[str, Any]:
    """The advisor's own JSON form of a diagnosis (``advisors.diagnosis.diagnosis_json``)."""
    return advisor.diagnosis_json(d)


def upper_bound(d: Diagnosis | None, e: Experiment[Spec]) -> float | None:
    """The diagnosis' upper bound on what experiment ``e``'s fix could gain (``advisors.diagnosis.upper_bound_for``)."""
    return advisor.upper_bound_for(d, e.fix.id) if d is not None else None


def cause_text(cause: str) -> str:
    """What a rule's cause is (``advisors.accounting.CAUSES``); the cause's own name for one not in that table."""
    return CAUSES[cause][1] if cause in CAUSES else cause


def rule_docs() -> list[dict[str, Any]]:
    """Every rule's documentation (``Rule.doc()``), in ``RULES`` order."""
    return [r.doc() for r in RULES]


def experiment_json(e: Experiment[Spec]) -> dict[str, Any]:
    """The advisor's JSON form of an experiment (``advisors.experiments.ladder_report.experiment_json``)."""
    return ladder_report.experiment_json(e)


def ladder_json(ladder: Ladder[Spec]) -> dict[str, Any]:
    """The advisor's JSON form of a ladder (the ``optimize --json`` contract, with ``where`` and ``change`` per
    round on a script), for the device its runs executed on."""
    from reports.experiment import arm_device

    device = arm_device(ladder.rungs[0].experiment.patched) if ladder.rungs else "cpu"
    return ladder_report.ladder_json(ladder, device)
