"""Look-ups the reports and pages make in the advisor's tables: a fix by id, a cause's words, the rules' docs, and
the JSON of an experiment or a ladder. Nothing is judged here: the diagnosis is the analysis'
(:func:`advisors.analysis.analyse`).

Only the ladder's JSON (``advisors.experiments``, the experiment machinery) is imported inside the functions that
print an experiment, so that analysing a trace never loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisors import diagnosis as advisor
from advisors.accounting import CAUSES
from advisors.fixes import FIXES
from advisors.rules import RULES
from advisors.verdict import Diagnosis, Fix

if TYPE_CHECKING:
    from advisors.experiments.experiment import Experiment
    from advisors.experiments.optimize import Ladder
    from advisors.experiments.trials import Spec


def fix_for(fix_id: str | None) -> Fix | None:
    """The :class:`~advisors.verdict.Fix` a finding proposes, from ``advisors.fixes.FIXES``."""
    return FIXES.get(fix_id) if fix_id else None


def upper_bound(d: Diagnosis | None, e: Experiment[Spec]) -> float | None:
    """The diagnosis' upper bound on what experiment ``e``'s fix could gain (``advisors.diagnosis.upper_bound_for``)."""
    return advisor.upper_bound_for(d, e.fix.id) if d is not None else None


def cause_text(cause: str) -> str:
    """What a rule's cause is (``advisors.accounting.CAUSES``), or the cause's name when it is not listed."""
    return CAUSES[cause][1] if cause in CAUSES else cause


def rule_docs() -> list[dict[str, Any]]:
    """Every rule's documentation (``Rule.doc()``), in ``RULES`` order."""
    return [r.doc() for r in RULES]


def experiment_json(e: Experiment[Spec]) -> dict[str, Any]:
    """The advisor's JSON form of an experiment (``advisors.experiments.ladder_report.experiment_json``)."""
    from advisors.experiments.ladder_report import experiment_json as as_json

    return as_json(e)


def ladder_json(ladder: Ladder[Spec]) -> dict[str, Any]:
    """The advisor's JSON form of a ladder (``advisors.experiments.ladder_report.ladder_json``: the ``optimize
    --json`` contract, with ``where`` and ``change`` per round on a script), for the device its runs executed on."""
    from advisors.experiments.ladder_report import ladder_json as as_json
    from reports.experiment import arm_device

    device = arm_device(ladder.rungs[0].experiment.patched) if ladder.rungs else "cpu"
    return as_json(ladder, device)
