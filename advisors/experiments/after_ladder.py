"""Advice after measurement: a ladder's final findings never re-propose a fix the ladder measured as no gain.

A fix that was run A/B and rejected (its interval did not clear the keep threshold, or the loss moved) is a
measurement, not a suggestion: in the final diagnosis the finding that would propose it again shows that
measurement (``measured``: round, speedup, interval, reason) and no fix. A fix reported *not applied* was never
measured, so it is left as it is (its own "not applied: why" is in the ladder's rounds).
"""

from __future__ import annotations

from typing import Any, Mapping

from advisors.diagnosis import diagnosis_json
from advisors.experiments.optimize import Ladder, Rung


def measured_no_gain(ladder: Ladder[Any]) -> dict[str, Rung[Any]]:
    """Fix id → the last rung that measured it and rejected it (not kept, applied)."""
    out: dict[str, Rung[Any]] = {}
    for r in ladder.rungs:
        e = r.experiment
        if not e.kept and not e.not_applied and not e.inconclusive and e.speedup is not None:
            out[e.fix.id] = r
        elif e.kept:
            out.pop(e.fix.id, None)
    return out


def measurement_json(r: Rung[Any]) -> dict[str, Any]:
    e = r.experiment
    return {
        "fix": e.fix.id,
        "round": r.round,
        "speedup": None if e.speedup is None else round(e.speedup, 4),
        "interval": [round(e.ratio.low, 4), round(e.ratio.high, 4)] if e.ratio else None,
        "verdict": "no gain",
        "reason": e.reason,
    }


def final_diagnosis_json(ladder: Ladder[Any]) -> dict[str, Any] | None:
    """The ladder's last diagnosis as JSON, with every fix it measured as no gain replaced by its measurement."""
    if ladder.last_diagnosis is None:
        return None
    return without_measured(diagnosis_json(ladder.last_diagnosis), measured_no_gain(ladder))


def without_measured(doc: dict[str, Any], measured: Mapping[str, Rung[Any]]) -> dict[str, Any]:
    """``doc`` (a :func:`diagnosis_json`) with measured-no-gain fixes taken out of findings and fix order."""

    def strip(f: dict[str, Any]) -> dict[str, Any]:
        fix = f.get("fix")
        out = dict(f)
        if fix and fix.get("id") in measured:
            out["fix"] = None
            out["measured"] = measurement_json(measured[fix["id"]])
            out["message"] = (
                f"{f['message']} (measured in round {measured[fix['id']].round}: "
                f"{fix['id']} gave no gain — {measured[fix['id']].experiment.reason})"
            )
        if "rules" in f:
            out["rules"] = [strip(m) for m in f["rules"]]
        return out

    doc = dict(doc, findings=[strip(f) for f in doc["findings"]])
    ranking = doc.get("ranking")
    if ranking:
        doc["ranking"] = dict(
            ranking, fix_order=[x for x in ranking["fix_order"] if x["fix"] not in measured]
        )
    return doc
