"""Look-ups the reports and pages make in the advisor's tables: a fix by id, a cause's words, the rules' docs, and
the JSON of an experiment or a ladder. Nothing is judged here: the diagnosis is the analysis'
(:func:`advisors.analysis.analyse`).

Plain imports of the advisor's own entry points; an experiment is rendered from its stored record
(:mod:`advisors.experiments.results.record`), never judged here.
"""

from __future__ import annotations

import re
from typing import Any

from advisors.accounting import CAUSES
from advisors.fixes import FIXES
from advisors.rules import RULES
from advisors.verdict import Diagnosis, Fix


def fix_for(fix_id: str | None, d: Diagnosis | None = None) -> Fix | None:
    """The :class:`~advisors.verdict.Fix` a finding proposes, from ``advisors.fixes.FIXES``; as written for
    the run of diagnosis ``d`` when given (its snippet's own worker count)."""
    if d is not None:
        return d.fix_here(fix_id, FIXES)
    return FIXES.get(fix_id) if fix_id else None


def cause_text(cause: str) -> str:
    """What a rule's cause is (``advisors.accounting.CAUSES``), or the cause's name when it is not listed."""
    return CAUSES[cause][1] if cause in CAUSES else cause


def rule_docs() -> list[dict[str, Any]]:
    """Every rule's documentation (``Rule.doc()``), in ``RULES`` order, its docstring as Markdown."""
    return [{**d, "doc": markdown_doc(d["doc"])} for d in (r.doc() for r in RULES)]


_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|obj|exc|const):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def markdown_doc(text: str) -> str:
    """A docstring's reStructuredText roles and literals (``:func:`x```, ````x````) as Markdown code spans;
    a role's ``~`` (show the last name only) is honoured."""

    def role(m: re.Match[str]) -> str:
        name = m.group(1)
        return f"`{name.rsplit('.', 1)[-1]}`" if m.group(0).count("`~") else f"`{name}`"

    return _LITERAL.sub(r"`\1`", _ROLE.sub(role, text or ""))
