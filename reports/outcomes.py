"""One outcome word per experiment and per ladder rung, and why a ladder stopped — from stored views (JSON-safe
dicts: :mod:`reports.experiment_view`), so a result read back after a reload says the same.

The words: ``kept``, ``rejected: <why>``, ``not applied: <why>``, ``failed: <error>``, ``inconclusive: <why>``
(the trials could not tell: other programs competed for the machine, or the pairs disagreed — neither kept nor
rejected, as ``compare``'s inconclusive). A fix that made the run slower is "rejected: slower …", never "no real
gain".
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from advisors.experiments.outcome_words import (FAILED_PREFIX, INCONCLUSIVE_PREFIX, NO_GAIN_PREFIX,  # noqa: F401
                                                  outcome, times)


def view_outcome(view: Mapping[str, Any]) -> str:
    """:func:`outcome` of a stored Apply view."""
    s = view.get("summary") or {}
    return outcome(bool(view.get("kept")), view.get("reason"), s.get("not_applied"), s.get("speedup"))


def row_outcome(row: Mapping[str, Any]) -> str:
    """:func:`outcome` of a stored ladder row (``reports.experiment.ladder_frame``)."""
    reason = row.get("reason")
    not_applied = reason if row.get("verdict") == "not applied" else None
    return outcome(bool(row.get("kept")), reason, not_applied, row.get("speed-up"))


def why_stopped(rows: Sequence[Mapping[str, Any]], rounds: int | None, bottleneck: str | None) -> str:
    """Why a ladder of ``rounds`` requested rounds ended where it did, in one sentence.

    ``rows``: the ladder's rows (one per attempted fix, in order); ``bottleneck``: its last diagnosis'. A ladder
    whose last requested round kept nothing ran all its rounds ("All 2 rounds ran; round 2 …"); one that ended
    before "Stopped in round 2 of 3: …" (never "Stopped after round 1" above a table showing round 2)."""
    kept_rounds = sorted({int(r["round"]) for r in rows if r.get("kept")})
    done = len(kept_rounds)
    if rounds is not None and done >= rounds:
        return f"All {rounds} round{'s' if rounds != 1 else ''} ran, each with a kept fix."
    stopped_at = done + 1
    tried = [r for r in rows if int(r.get("round", 0)) == stopped_at]
    where = f"the {bottleneck} bottleneck" if bottleneck else "what the diagnosis found"  # plain text: no markup
    if rounds is not None and stopped_at >= rounds:
        head, it = f"All {rounds} round{'s' if rounds != 1 else ''} ran; ", f"round {stopped_at} "
    else:
        head, it = f"Stopped in round {stopped_at}{f' of {rounds}' if rounds is not None else ''}: ", "it "
    if not tried:
        return f"{head}{it}found no fix left for {where} that fits this run."
    last = tried[-1]
    word = row_outcome(last)
    if word.startswith("failed"):
        return f"{head}round {stopped_at}'s fix ({last.get('fix')}) {word}."
    n = len(tried)
    return (f"{head}{it}tried {n} fix{'es' if n != 1 else ''} for {where} and kept none "
            f"(last: {last.get('fix')}, {word}).")


def complete(rows: Sequence[Mapping[str, Any]], rounds: int | None) -> bool:
    """Every requested round kept a fix (the ladder's success)."""
    return rounds is not None and len({int(r["round"]) for r in rows if r.get("kept")}) >= rounds
