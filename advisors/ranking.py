"""The first fix a person would try: the verdict names the class with the most time at stake, and the fixes
are offered by expected gain for the effort.

Expected gain is the finding's settled severity (share of step time its fix can win back at most); effort is
the fix's level (:data:`advisors.fixes.EFFORT_LEVELS`: a keyword < a config line < a code change < a loop
rewrite). Fixes are ordered by ``severity / (1 + EFFORT_WEIGHT × level)``. When a finding of another class
comes within :data:`CLOSE_MARGIN` of the binding one (its severity at least ``1 − CLOSE_MARGIN`` of the
binding's), both are named — the other as the *close second* — and whichever fix is cheaper goes first, with
that reason (equal effort: the larger share goes first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisors.fixes import EFFORT_LEVELS, effort
from advisors.verdict import Diagnosis, Finding

CLOSE_MARGIN = 0.25  # a rival within 25% of the binding finding's severity is a close second
EFFORT_WEIGHT = 0.5  # each effort level divides the expected gain by 1.5, 2, 2.5


@dataclass(frozen=True)
class Ranking:
    """The fixes in the order to try them, the close second (if any) and why the first fix goes first."""

    order: tuple[Finding, ...]  # findings with a fix, in the order to try their fixes
    close_second: Finding | None
    why_first: str | None


def rank(d: Diagnosis) -> Ranking:
    """Order ``d``'s fixes by gain for effort, naming a close second of another class (see the module docs)."""
    with_fix = [f for f in d.findings if f.fix_id and f.severity > 0]
    order = tuple(
        sorted(with_fix, key=lambda f: -f.severity / (1 + EFFORT_WEIGHT * effort(f.fix_id)))
    )
    b = d.binding
    if b is None:
        return Ranking(order, None, None)
    rival = next(
        (
            f
            for f in d.others
            if f.bottleneck != b.bottleneck
            and f.severity > 0
            and f.severity >= (1 - CLOSE_MARGIN) * b.severity
        ),
        None,
    )
    if rival is None:
        return Ranking(order, None, None)
    first, second = (
        (rival, b) if rival.fix_id and effort(rival.fix_id) < effort(b.fix_id) else (b, rival)
    )
    why = (
        f"{b.bottleneck.value} holds {100 * b.severity:.0f}% of the step and {rival.bottleneck.value} "
        f"{100 * rival.severity:.0f}%, within {100 * CLOSE_MARGIN:.0f}% of each other; "
        + (
            f"{first.fix_id} ({effort_level(first)}) goes first: cheaper than {second.fix_id or 'the other'} "
            f"({effort_level(second)}) for a gain of the same order"
            if first is rival
            else f"{first.fix_id or 'the binding cause'} ({effort_level(first)}) goes first: the larger share, at no more "
            "effort"
        )
    )
    rest = tuple(f for f in order if f is not first and f is not second)
    head = tuple(f for f in (first, second) if f.fix_id)
    return Ranking(head + rest, rival, why)


def ranking_json(r: Ranking) -> dict[str, Any]:
    """``fix_order`` (fix id, effort, severity), ``close_second`` (rule, bottleneck, severity) and ``why_first``."""
    return {
        "fix_order": [
            {"fix": f.fix_id, "effort": effort_level(f), "severity": f.severity, "rule": f.rule}
            for f in r.order
        ],
        "close_second": None
        if r.close_second is None
        else {
            "rule": r.close_second.rule,
            "bottleneck": r.close_second.bottleneck.value,
            "severity": r.close_second.severity,
            "fix": r.close_second.fix_id,
        },
        "why_first": r.why_first,
    }


def effort_level(f: Finding) -> str:
    """A finding's fix's effort in words (``keyword`` … ``loop rewrite``; ``no fix``)."""
    return EFFORT_LEVELS[effort(f.fix_id)] if f.fix_id else "no fix"
