"""The one record of a to-quality experiment (``optimize --to-quality``), beside :class:`ExperimentRecord` and
:class:`LadderRecord`: its target, budget and whether its seeds were one run, and per round the outcome word, the
time to target of each arm, the time-to-target ratio with its interval, the prediction and the measurement in the
same two parts (steps-to-target ratio × time-per-step ratio = time ratio, after ÷ before), other programs' load
during each arm, the interleave's baseline runs it was judged against, and early stopping's trade-off line. Stored
as ``view.json`` (mode ``quality``, :mod:`advisors.experiments.results.stored_view`); the Runs list's label, the
Advisor page's quality panel and the Markdown/HTML report (:mod:`reports.quality`) render it, and ``--json``
carries it as ``record``.

It is taken from the experiment's JSON (:func:`advisors.experiments.to_quality_report.quality_json`, where each
number is computed once) by :func:`quality_record`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from advisors.experiments.results.quality_words import noise_line

QUALITY_OUTCOMES = ("kept", "rejected", "inconclusive", "not applied", "trade-off", "advice")


@dataclass(frozen=True)
class Parts:
    """A time ratio in its two parts (after ÷ before): steps to the target × time per step."""

    steps_ratio: float | None
    step_time_ratio: float | None
    time_ratio: float | None

    @classmethod
    def of(cls, raw: Mapping[str, Any] | None) -> Parts | None:
        if not raw:
            return None
        return cls(raw.get("steps_ratio"), raw.get("step_time_ratio"), raw.get("time_ratio"))

    @property
    def text(self) -> str:
        def f(x: float | None) -> str:
            return "—" if x is None else f"{x:.2f}"

        return f"steps × {f(self.steps_ratio)} · step time × {f(self.step_time_ratio)} = time × {f(self.time_ratio)}"


def prediction_text(predicted: Parts | None, measured: Parts | None) -> str | None:
    """Predicted and measured, each in its two parts (``None``: nothing was predicted)."""
    if predicted is None:
        return None
    return f"predicted {predicted.text}; measured {measured.text if measured is not None else 'not measured'}"


@dataclass(frozen=True)
class QualityRoundRecord:
    round: int
    fix_id: str
    title: str
    outcome: str  # one of QUALITY_OUTCOMES
    reason: str
    ratio: float | None = None  # time to target, before ÷ after (> 1: sooner)
    low: float | None = None
    high: float | None = None
    predicted: Parts | None = None
    measured: Parts | None = None
    load_before: tuple[
        float | None, ...
    ] = ()  # other programs' cores during each seed of the baseline's arm
    load_after: tuple[float | None, ...] = ()
    rule: str = ""
    before_s: float | None = None  # each arm's time to target (MLPerf mean; None: the arm failed)
    after_s: float | None = None
    saved_s: float | None = None  # early stopping: the time it saves, and its share of the run
    saved_share: float | None = None
    not_applied: str | None = None
    judged_against: tuple[
        int, ...
    ] = ()  # the interleave's baseline runs this round was judged against
    outcome_why: str | None = None  # the round's reason code (a Why); None in an older record

    @property
    def label(self) -> str:
        return self.outcome if self.ratio is None else f"{self.outcome} {self.ratio:.2f}×"

    @property
    def ratio_text(self) -> str:
        """The ratio with its interval, or "(one run)" where the seeds had no spread (the reason says the rule)."""
        if self.ratio is None:
            return "—"
        if self.low is None:
            return f"{self.ratio:.2f}× (one run)"
        return f"{self.ratio:.2f}× [{self.low:.2f}, {'∞' if self.high is None else f'{self.high:.2f}'}]"

    @property
    def prediction_text(self) -> str | None:
        """Predicted and measured, each in its two parts (``None``: nothing was predicted)."""
        return prediction_text(self.predicted, self.measured)

    @property
    def tradeoff(self) -> str | None:
        """Early stopping's one line (its reason), for an early-stopping round."""
        return self.reason if self.saved_s is not None else None


@dataclass(frozen=True)
class QualityRecord:
    target: str
    seeds: int
    one_run: bool  # the baseline's seeds gave one curve: the script's seed could not be varied
    rounds: tuple[QualityRoundRecord, ...]
    budget: str = ""  # as stated: "300 steps", "60 s"
    noise: str | None = None  # the gradient noise scale in a line
    projection: str | None = None  # the whole run's hours (and cost) in a sentence
    floor: str | None = (
        None  # why the target sits on the baseline's floor (advisors.quality.fair.on_floor)
    )

    @property
    def label(self) -> str:
        """What the Runs list shows: the best kept round's ratio, else the rounds' outcome words."""
        kept = [r for r in self.rounds if r.outcome == "kept" and r.ratio]
        if kept:
            return f"to quality: kept {max(r.ratio or 0.0 for r in kept):.2f}×"
        words = sorted({r.outcome for r in self.rounds})
        return "to quality: " + (", ".join(words) if words else "no rounds")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> QualityRecord:
        """Read back (an unknown outcome word is refused; fields a record stored earlier lacks read empty)."""
        rounds = []
        for r in raw["rounds"]:
            if r["outcome"] not in QUALITY_OUTCOMES:
                raise ValueError(f"unknown outcome {r['outcome']!r}")
            rounds.append(
                QualityRoundRecord(
                    round=int(r["round"]),
                    fix_id=str(r["fix_id"]),
                    title=str(r["title"]),
                    outcome=r["outcome"],
                    reason=str(r["reason"]),
                    ratio=r.get("ratio"),
                    low=r.get("low"),
                    high=r.get("high"),
                    predicted=Parts.of(r.get("predicted")),
                    measured=Parts.of(r.get("measured")),
                    load_before=tuple(r.get("load_before") or ()),
                    load_after=tuple(r.get("load_after") or ()),
                    rule=str(r.get("rule") or ""),
                    before_s=r.get("before_s"),
                    after_s=r.get("after_s"),
                    saved_s=r.get("saved_s"),
                    saved_share=r.get("saved_share"),
                    not_applied=r.get("not_applied"),
                    judged_against=tuple(int(i) for i in r.get("judged_against") or ()),
                    outcome_why=r.get("outcome_why"),
                )
            )
        return cls(
            str(raw["target"]),
            int(raw["seeds"]),
            bool(raw["one_run"]),
            tuple(rounds),
            str(raw.get("budget") or ""),
            raw.get("noise"),
            raw.get("projection"),
            raw.get("floor"),
        )


def quality_record(out: Mapping[str, Any]) -> QualityRecord:
    """The record of the experiment whose ``optimize --to-quality --json`` output is ``out``."""
    t = out["target"]
    rounds = []
    for r in out["rounds"]:
        tt = r.get("time_to_target") or {}
        iv = tt.get("interval") or (None, None)
        load = r.get("load") or {}
        es = r.get("early_stopping") or {}
        rounds.append(
            QualityRoundRecord(
                round=int(r["round"]),
                fix_id=str(r["fix"]),
                title=str(r["title"]),
                outcome=str(r["outcome"]),
                reason=str(r["reason"]),
                ratio=tt.get("ratio"),
                low=iv[0],
                high=iv[1],
                predicted=Parts.of(r.get("predicted")),
                measured=Parts.of(r.get("measured")),
                load_before=tuple(load.get("before") or ()),
                load_after=tuple(load.get("after") or ()),
                rule=str(r.get("rule") or ""),
                before_s=None if (tt.get("before") or {}).get("failed") else tt.get("before_s"),
                after_s=None if (tt.get("after") or {}).get("failed") else tt.get("after_s"),
                saved_s=es.get("saved_s"),
                saved_share=es.get("saved_share"),
                not_applied=r.get("not_applied"),
                judged_against=tuple(r.get("judged_against") or ()),
                outcome_why=r.get("outcome_why"),
            )
        )
    sign = "≤" if t["goal"] == "min" else "≥"
    note = f": {t['note']}" if t.get("note") else ""
    return QualityRecord(
        f"{t['metric']} {sign} {t['value']:.4g} ({t['source']}{note})",
        int(out["seeds"]),
        bool(out.get("one_run")),
        tuple(rounds),
        str((out.get("budget") or {}).get("stated") or ""),
        noise_line(out["noise_scale"]) if out.get("noise_scale") else None,
        (out.get("projection") or {}).get("text"),
        out.get("floor"),
    )
