"""The one record of a to-quality experiment (``optimize --to-quality``), beside :class:`ExperimentRecord` and
:class:`LadderRecord`: its target, whether its seeds were one run, and per round the outcome word, the
time-to-target ratio with its interval, the prediction and the measurement in the same two parts (steps-to-target
ratio × time-per-step ratio = time ratio, after ÷ before), other programs' load during each arm, and early
stopping's trade-off line. Stored as ``view.json`` (mode ``quality``, :mod:`advisors.experiments.results.
stored_view`); the Runs list's label reads it.

It is taken from the experiment's JSON (:func:`advisors.experiments.to_quality_report.quality_json`, where each
number is computed once) by :func:`quality_record`, so the JSON, the report, the Advisor panel and this record
show the same numbers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

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
    load_before: tuple[float | None, ...] = ()  # other programs' cores during each seed of the baseline's arm
    load_after: tuple[float | None, ...] = ()

    @property
    def label(self) -> str:
        return self.outcome if self.ratio is None else f"{self.outcome} {self.ratio:.2f}×"


@dataclass(frozen=True)
class QualityRecord:
    target: str
    seeds: int
    one_run: bool  # the baseline's seeds gave one curve: the script's seed could not be varied
    rounds: tuple[QualityRoundRecord, ...]

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
        rounds = []
        for r in raw["rounds"]:
            if r["outcome"] not in QUALITY_OUTCOMES:
                raise ValueError(f"unknown outcome {r['outcome']!r}")
            rounds.append(QualityRoundRecord(
                round=int(r["round"]), fix_id=str(r["fix_id"]), title=str(r["title"]), outcome=r["outcome"],
                reason=str(r["reason"]), ratio=r.get("ratio"), low=r.get("low"), high=r.get("high"),
                predicted=Parts.of(r.get("predicted")), measured=Parts.of(r.get("measured")),
                load_before=tuple(r.get("load_before") or ()), load_after=tuple(r.get("load_after") or ())))
        return cls(str(raw["target"]), int(raw["seeds"]), bool(raw["one_run"]), tuple(rounds))


def quality_record(out: Mapping[str, Any]) -> QualityRecord:
    """The record of the experiment whose ``optimize --to-quality --json`` output is ``out``."""
    t = out["target"]
    rounds = []
    for r in out["rounds"]:
        tt = r.get("time_to_target") or {}
        iv = tt.get("interval") or (None, None)
        load = r.get("load") or {}
        rounds.append(QualityRoundRecord(
            round=int(r["round"]), fix_id=str(r["fix"]), title=str(r["title"]), outcome=str(r["outcome"]),
            reason=str(r["reason"]), ratio=tt.get("ratio"), low=iv[0], high=iv[1],
            predicted=Parts.of(r.get("predicted")), measured=Parts.of(r.get("measured")),
            load_before=tuple(load.get("before") or ()), load_after=tuple(load.get("after") or ())))
    sign = "≤" if t["goal"] == "min" else "≥"
    return QualityRecord(f"{t['metric']} {sign} {t['value']:.4g} ({t['source']})", int(out["seeds"]),
                         bool(out.get("one_run")), tuple(rounds))
