"""An experiment's verdict as data: one :class:`Outcome`, made where the judgement is made
(:func:`advisors.experiments.experiment._judge`) and turned into words by :func:`render` at the
edge.

``word`` is what the verdict is (:class:`Word`: kept, rejected, inconclusive, not applied, failed,
…) and ``why`` the reason code (:class:`Why`: gain, slower, contended, …); code that needs to know
the verdict reads those two, never the text. The texts are made here from ``params`` (what the
words are made from: the interval as printed, the loss note, the run's status and error…), once,
when the Outcome is built:

- ``reason``: the verdict's whole sentence, as :attr:`Experiment.reason` stores and shows it
  ("no real gain: 1.02x, 95% interval [0.97, 1.08] does not clear 1.03x; loss …");
- ``detail``: the sentence a user reads after the word ("slower, 0.52×, 95% interval [0.41,
  0.63]"), with ratios written ``×`` as every table of the dashboard writes them; empty for a kept
  fix.

``render(o)`` is ``"<word>: <detail>"`` (or the bare word): the record's ``outcome_text``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Mapping


class Word(StrEnum):
    """The one outcome word of an experiment (a to-quality round has two more: trade-off and
    advice)."""

    KEPT = "kept"
    REJECTED = "rejected"
    INCONCLUSIVE = "inconclusive"  # the trials could not tell: neither kept nor rejected
    NOT_APPLIED = "not applied"  # the fix never acted: nothing was judged
    FAILED = "failed"  # the patched run crashed, ran out of memory or was killed
    CANCELLED = "cancelled"  # the user stopped it before a verdict
    TRADE_OFF = "trade-off"  # to quality: early stopping's saving against its quality, user's call
    ADVICE = "advice"  # to quality: a candidate that was not run


class Why(StrEnum):
    """Why an experiment got its word (the reason code)."""

    GAIN = "gain"  # kept: the interval's low end clears the bar and the loss holds
    MEMORY_HEADROOM = "memory_headroom"  # kept: a memory fix cuts the peak at a bounded cost
    TURNS_OK = "turns_ok"  # kept: a baseline that failed runs ok with the fix
    OVER_BUDGET = "over_budget"  # rejected: the fix makes the run work, above its memory budget
    NO_GAIN = "no_gain"  # rejected: the interval does not clear the bar
    SLOWER = "slower"  # rejected: the whole interval is below 1
    LOSS_BREAKS = "loss_breaks"  # rejected: faster, but the loss does not hold
    RUNS_LOSS_BREAKS = "runs_loss_breaks"  # rejected: the failing baseline runs, the loss breaks
    CONTENDED = "contended"  # inconclusive: other programs competed, too few clean pairs
    PAIRS_DISAGREE = "pairs_disagree"  # inconclusive: some pair saw the patched run slower
    LEAN = "lean"  # inconclusive: the point leans to a gain the interval cannot show
    RUN_ENDED = "run_ended"  # failed: the patched run did not end ok
    NOT_ACTED = "not_acted"  # not applied: the fix did not act in the patched run
    CHECKED = "checked"  # inconclusive: ``optimize --check`` ran the patched command once, no A/B
    UNSTATED = "unstated"  # an old stored reason that says none of these
    # to quality (``optimize --to-quality``): time to the target and early stopping
    NEITHER_REACHED = "neither_reached"  # rejected: neither arm reached the target
    CHANGE_MISSED = "change_missed"  # rejected: the change's arm never reached the target
    BASELINE_MISSED = "baseline_missed"  # rejected: only the change reached it, no ratio to measure
    AT_TARGET_AT_START = "at_target_at_start"  # rejected: an arm was at the target from the start
    ONE_RUN_GAIN = "one_run_gain"  # kept: seeds that are one run, sooner beyond the tolerance
    ONE_RUN_NO_GAIN = "one_run_no_gain"  # rejected: seeds that are one run, not beyond it
    STOPS_AT_TARGET = "stops_at_target"  # kept: stopping at the target's first point saves time
    NEVER_REACHES = "never_reaches"  # rejected: a run never reaches the target
    REACHES_AT_END = "reaches_at_end"  # rejected: the target is reached only at the end
    STILL_IMPROVING = "still_improving"  # rejected: patience never ran out
    TRADE_OFF = "trade_off"  # trade-off: the time saved against the quality given up
    NO_RUN = "no_run"  # rejected: no run to measure early stopping on
    ADVICE_ONLY = "advice_only"  # advice: a candidate that is not run


#: The word each reason code gives.
WORD_OF: Mapping[Why, Word] = {
    Why.GAIN: Word.KEPT,
    Why.MEMORY_HEADROOM: Word.KEPT,
    Why.TURNS_OK: Word.KEPT,
    Why.OVER_BUDGET: Word.REJECTED,
    Why.NO_GAIN: Word.REJECTED,
    Why.SLOWER: Word.REJECTED,
    Why.LOSS_BREAKS: Word.REJECTED,
    Why.RUNS_LOSS_BREAKS: Word.REJECTED,
    Why.UNSTATED: Word.REJECTED,
    Why.CONTENDED: Word.INCONCLUSIVE,
    Why.PAIRS_DISAGREE: Word.INCONCLUSIVE,
    Why.LEAN: Word.INCONCLUSIVE,
    Why.RUN_ENDED: Word.FAILED,
    Why.NOT_ACTED: Word.NOT_APPLIED,
    Why.CHECKED: Word.INCONCLUSIVE,
    Why.NEITHER_REACHED: Word.REJECTED,
    Why.CHANGE_MISSED: Word.REJECTED,
    Why.BASELINE_MISSED: Word.REJECTED,
    Why.AT_TARGET_AT_START: Word.REJECTED,
    Why.ONE_RUN_GAIN: Word.KEPT,
    Why.ONE_RUN_NO_GAIN: Word.REJECTED,
    Why.STOPS_AT_TARGET: Word.KEPT,
    Why.NEVER_REACHES: Word.REJECTED,
    Why.REACHES_AT_END: Word.REJECTED,
    Why.STILL_IMPROVING: Word.REJECTED,
    Why.TRADE_OFF: Word.TRADE_OFF,
    Why.NO_RUN: Word.REJECTED,
    Why.ADVICE_ONLY: Word.ADVICE,
}


@dataclass(frozen=True)
class Outcome:
    """An experiment's verdict: its word, its reason code, the ratio it rests on (``low``/``high``:
    the interval, ``edge``: the bar the low end was read against) and its two texts (see the module
    docs)."""

    word: Word
    why: Why
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    edge: float | None = None
    detail: str = ""  # the sentence after the word, as the user reads it
    reason: str = ""  # the verdict's whole sentence
    params: Mapping[str, Any] = field(default_factory=dict)  # what the two texts are made from

    @property
    def kept(self) -> bool:
        return self.word is Word.KEPT


def render(o: Outcome) -> str:
    """The outcome word with its why: ``kept``, ``rejected: slower, 0.52×, 95% interval [0.41,
    0.63]``."""
    return f"{o.word}: {o.detail}" if o.detail else str(o.word)


def judged(
    why: Why,
    ratio: float | None = None,
    low: float | None = None,
    high: float | None = None,
    edge: float | None = None,
    **params: Any,
) -> Outcome:
    """The Outcome of reason code ``why``, its texts made from ``params``:

    ``interval`` (``1.02x, 95% interval [0.97, 1.08]``) and ``loss`` (the loss note, from ``;
    loss …``) for every judged verdict; ``headroom`` (memory headroom); ``baseline_status``,
    ``budget``, ``cost`` (turns_ok, over_budget); ``delta``, ``tolerance`` (the loss breaks);
    ``said`` (inconclusive's and not applied's sentence); ``status`` and ``error`` (run_ended)."""
    reason, detail = _texts(why, params, edge)
    return Outcome(WORD_OF[why], why, ratio, low, high, edge, detail, reason, dict(params))


def _texts(why: Why, p: Mapping[str, Any], edge: float | None) -> tuple[str, str]:
    """``(reason, detail)`` of reason code ``why``."""
    interval, loss = p.get("interval", ""), p.get("loss", "")
    if why is Why.GAIN:
        return f"kept: {interval} per-sample throughput{loss}", ""
    if why is Why.MEMORY_HEADROOM:
        return (
            f"kept for memory headroom: {p['headroom']} at {interval} per-sample throughput{loss}"
        ), ""
    if why in (Why.TURNS_OK, Why.OVER_BUDGET):
        reason = (
            f"turns {p['baseline_status']} into ok{p.get('budget', '')}{p.get('cost', '')}{loss}"
        )
        return reason, "" if why is Why.TURNS_OK else times(reason.strip())
    if why is Why.RUNS_LOSS_BREAKS:
        reason = (
            f"runs, but the loss does not hold ({p['delta']:+.4f} > {p['tolerance']:.0%}){loss}"
        )
        return reason, times(reason.strip())
    if why in (Why.NO_GAIN, Why.SLOWER):
        reason = f"no real gain: {interval} does not clear {edge:.2f}x{loss}"
        return reason, times((f"slower, {interval}{loss}" if why is Why.SLOWER else reason).strip())
    if why is Why.LOSS_BREAKS:
        reason = (
            f"faster ({interval}) but the loss does not hold (tolerance {p['tolerance']:.0%}){loss}"
        )
        return reason, times(reason.strip())
    if why in (Why.CONTENDED, Why.PAIRS_DISAGREE, Why.LEAN):
        said = f"{p['said']}; {interval}{loss}"
        return f"inconclusive: {said}", times(said.strip())
    if why is Why.RUN_ENDED:
        status, error = str(p["status"]), str(p.get("error") or "")
        reason = f"the patched run ended {status}" + (f": {error}" if error else "")
        return reason, ended(status, error.rstrip())
    if why is Why.CHECKED:
        said = (
            "--check ran the patched command once to show the change acts; no A/B trials, "
            "so no verdict"
        )
        return f"inconclusive: {said}", said
    if why is Why.NOT_ACTED:
        return f"not applied: {p['said']}", times(str(p["said"]))
    said = str(p.get("said") or "")
    return said, times(said.strip() or "no reason stored")


def ended(status: str, error: str) -> str:
    """``failed`` + ``RecursionError: …`` → ``RecursionError: …``; ``out_of_memory`` + ``…`` →
    ``out of memory: …``: the outcome word says "failed" once."""
    if status == "failed":
        return error or "the run failed"
    return status.replace("_", " ") + (f": {error}" if error else "")


def slower(point: float, high: float) -> bool:
    """A ratio is "slower" only when its whole interval, as printed (two decimals), is below 1: a
    point under 1 whose interval spans 1 ([0.19, 2.07]) is too noisy to call slower."""
    return point < 1 and float(f"{high:.2f}") < 1.0


def times(text: str) -> str:
    """``0.42x`` → ``0.42×``: the ratio sign every table and metric of the dashboard uses."""
    return re.sub(r"(?<=\d)x\b", "×", text)
