"""Reading the verdict of an OLD record back from its text: the one place that looks at a
reason's words.

Records and stored views written before verdicts were data
(:mod:`advisors.experiments.results.outcome`) hold only the reason sentence, the kept flag and the
not-applied why; :func:`from_text` rebuilds their
:class:`~advisors.experiments.results.outcome.Outcome` from those, so an old view reads the same
word and text it read when it was stored. A new experiment never comes through here: its Outcome
is made where it is judged.
"""

from __future__ import annotations

import re

from advisors.experiments.results.outcome import Outcome, Why, WORD_OF, ended, render, times

FAILED_PREFIX = "the patched run ended "
NO_GAIN_PREFIX = "no real gain: "
INCONCLUSIVE_PREFIX = "inconclusive: "
#: An old reason's opening and the code it gives (the kept ones when the record says kept).
_KEPT = (("kept for memory headroom", Why.MEMORY_HEADROOM), ("turns ", Why.TURNS_OK))
_REJECTED = (
    ("turns ", Why.OVER_BUDGET),
    ("runs, but the loss", Why.RUNS_LOSS_BREAKS),
    ("faster (", Why.LOSS_BREAKS),
    (NO_GAIN_PREFIX, Why.NO_GAIN),
)
_INCONCLUSIVE = (("pairs disagree", Why.PAIRS_DISAGREE), ("the trials lean", Why.LEAN))


def from_text(
    kept: bool, reason: str | None, not_applied: str | None = None, speedup: float | None = None
) -> Outcome:
    """The Outcome of an old record, from its stored text (see the module docs).

    "rejected: slower" only when the whole interval of the ratio is below 1: a point estimate under 1 whose
    interval spans 1 ([0.19, 2.07]) is too noisy to call slower, and stays "rejected: no real gain"."""
    reason = (reason or "").strip()
    if kept:
        why = next((w for p, w in _KEPT if reason.startswith(p)), Why.GAIN)
        return _old(why, "", reason, speedup)
    if not_applied:
        return _old(Why.NOT_ACTED, times(not_applied), reason, speedup)
    if reason.startswith(INCONCLUSIVE_PREFIX):
        said = reason[len(INCONCLUSIVE_PREFIX) :]
        why = next((w for p, w in _INCONCLUSIVE if said.startswith(p)), Why.CONTENDED)
        return _old(why, times(said), reason, speedup)
    if reason.startswith(FAILED_PREFIX):
        status, _, error = reason[len(FAILED_PREFIX) :].partition(": ")
        return _old(Why.RUN_ENDED, ended(status, error), reason, speedup)
    if (
        speedup is not None
        and speedup < 1
        and reason.startswith(NO_GAIN_PREFIX)
        and _clearly_below_one(reason)
    ):
        said = re.sub(r" does not clear [0-9.]+x", "", reason[len(NO_GAIN_PREFIX) :])
        return _old(Why.SLOWER, times("slower, " + said), reason, speedup)
    why = next((w for p, w in _REJECTED if reason.startswith(p)), Why.UNSTATED)
    return _old(why, times(reason or "no reason stored"), reason, speedup)


def outcome(
    kept: bool, reason: str | None, not_applied: str | None = None, speedup: float | None = None
) -> str:
    """An old record's outcome text (``kept``, ``rejected: …``, ``inconclusive: …``), as it read
    when it was stored."""
    return render(from_text(kept, reason, not_applied, speedup))


def _old(why: Why, detail: str, reason: str, speedup: float | None) -> Outcome:
    return Outcome(WORD_OF[why], why, ratio=speedup, detail=detail, reason=reason)


def _clearly_below_one(reason: str) -> bool:
    """True when the reason's interval lies wholly below 1 (or it states none, as older stored reasons may)."""
    m = re.search(r"interval \[([0-9.]+), ([0-9.]+)\]", reason)
    return m is None or float(m.group(2)) < 1.0
