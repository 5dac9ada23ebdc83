"""The advisor as the reports see it: a diagnosis when the advisor can give one, else an honest reason.

Plain imports of the advisor's own entry points; an experiment is rendered from its stored record
(:mod:`advisors.experiments.results.record`), never judged here.
"""

from __future__ import annotations

from typing import Any

from advisors import diagnosis as advisor
from advisors.accounting import CAUSES
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
    """The :class:`~advisors.verdict.Fix` a finding proposes, from ``advisors.fixes.FIXES``."""
    return FIXES.get(fix_id) if fix_id else None


def diagnosis_json(d: Diagnosis) -> dict[str, Any]:
    """The advisor's own JSON form of a diagnosis (``advisors.diagnosis.diagnosis_json``)."""
    return advisor.diagnosis_json(d)


def cause_text(cause: str) -> str:
    """What a rule's cause is (``advisors.accounting.CAUSES``), or the cause's name when it is not listed."""
    return CAUSES[cause][1] if cause in CAUSES else cause


def rule_docs() -> list[dict[str, Any]]:
    """Every rule's documentation (``Rule.doc()``), in ``RULES`` order."""
    return [r.doc() for r in RULES]
