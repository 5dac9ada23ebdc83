"""The one outcome word of an experiment: computed here, in the advisor, so ``optimize --json``, the dashboard and
the reports say the same (:mod:`reports.outcomes` reads stored views through it).

The words: ``kept``, ``rejected: <why>``, ``not applied: <why>``, ``failed: <error>``, ``inconclusive: <why>``
(the trials could not tell: other programs competed for the machine, or the pairs disagreed — neither kept nor
rejected, as ``compare``'s inconclusive). A fix that made the run slower is "rejected: slower …", never "no real
gain".
"""

from __future__ import annotations

import re

FAILED_PREFIX = "the patched run ended "
NO_GAIN_PREFIX = "no real gain: "
INCONCLUSIVE_PREFIX = "inconclusive: "


def outcome(kept: bool, reason: str | None, not_applied: str | None = None, speedup: float | None = None) -> str:
    """The one outcome word of an experiment, with its why (ratios written ``0.52×``, as beside it).

    "rejected: slower" only when the whole interval of the ratio is below 1: a point estimate under 1 whose
    interval spans 1 ([0.19, 2.07]) is too noisy to call slower, and stays "rejected: no real gain"."""
    reason = (reason or "").strip()
    if kept:
        return "kept"
    if not_applied:
        return times(f"not applied: {not_applied}")
    if reason.startswith(INCONCLUSIVE_PREFIX):
        return times(reason)
    if reason.startswith(FAILED_PREFIX):
        return f"failed: {_ended(reason[len(FAILED_PREFIX):])}"
    if speedup is not None and speedup < 1 and reason.startswith(NO_GAIN_PREFIX) and _clearly_below_one(reason):
        return times("rejected: slower, " + re.sub(r" does not clear [0-9.]+x", "", reason[len(NO_GAIN_PREFIX):]))
    return times(f"rejected: {reason or 'no reason stored'}")


def _ended(how: str) -> str:
    """``failed: RecursionError: …`` → ``RecursionError: …``; ``out_of_memory: …`` → ``out of memory: …``: the
    outcome word says "failed" once."""
    status, sep, error = how.partition(": ")
    if status == "failed":
        return error or "the run failed"
    return f"{status.replace('_', ' ')}{sep}{error}"


def times(text: str) -> str:
    """``0.42x`` → ``0.42×``: the ratio sign every table and metric of the dashboard uses."""
    return re.sub(r"(?<=\d)x\b", "×", text)


def _clearly_below_one(reason: str) -> bool:
    """True when the reason's interval lies wholly below 1 (or it states none, as older stored reasons may)."""
    m = re.search(r"interval \[([0-9.]+), ([0-9.]+)\]", reason)
    return m is None or float(m.group(2)) < 1.0
