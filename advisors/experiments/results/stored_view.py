"""An experiment's stored view (``view.json``): its record (:mod:`advisors.experiments.results.record`) and, for an
Apply, the charts' inputs (:mod:`advisors.experiments.results.evidence`). Written once when the experiment ends; every
page, the Runs list and the reports read it back through :func:`read_view` — never the job in memory — so what a
user saw once is what every later session sees. A view stored by an older Stepwise (schema 1: the summary
and ladder rows) is read into a record the same way, its outcome word and code read back from its
text by :func:`advisors.experiments.results.words.from_text` (the one reader of old records'
text).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import orjson

from advisors.experiments.results.quality_record import QualityRecord
from advisors.experiments.results.outcome import render
from advisors.experiments.results.words import from_text
from advisors.experiments.results.record import (
    SCHEMA,
    BoundRecord,
    ExperimentRecord,
    LadderRecord,
    TrialRecord,
    baseline_moves,
    complete,
    why_stopped,
)


@dataclass(frozen=True)
class StoredView:
    """A stored experiment read back: an Apply's ``record`` with its ``evidence``, a ``ladder``, or a to-quality
    experiment's ``quality`` record."""

    mode: str  # apply | ladder | quality
    record: ExperimentRecord | None = None
    ladder: LadderRecord | None = None
    evidence: Mapping[str, Any] | None = None
    quality: QualityRecord | None = None

    @property
    def label(self) -> str:
        """What the Runs list shows for it (``kept 1.42×``, ``inconclusive 0.98×``, ``ladder 1.80×``)."""
        if self.ladder is not None:
            return self.ladder.label
        if self.quality is not None:
            return self.quality.label
        return self.record.label if self.record is not None else "—"

    @property
    def trials(self) -> tuple[TrialRecord, ...]:
        if self.ladder is not None:
            return self.ladder.trials
        return self.record.trials if self.record is not None else ()


def apply_view(rec: ExperimentRecord, evidence: Mapping[str, Any]) -> dict[str, Any]:
    """An Apply as it is stored."""
    return _json_safe(
        {"schema": SCHEMA, "mode": "apply", "record": rec.to_json(), "evidence": dict(evidence)}
    )


def ladder_view(rec: LadderRecord) -> dict[str, Any]:
    """A ladder as it is stored."""
    return _json_safe({"schema": SCHEMA, "mode": "ladder", "ladder": rec.to_json()})


def quality_view(rec: QualityRecord) -> dict[str, Any]:
    """A to-quality experiment as it is stored."""
    return _json_safe({"schema": SCHEMA, "mode": "quality", "quality": rec.to_json()})


def roles(trials: tuple[TrialRecord, ...]) -> dict[str, list[str | None]]:
    """Each trial run's part (``baseline``, ``patched``, ``reference``), by run id."""
    out: dict[str, list[str | None]] = {}
    for t in trials:
        out.setdefault(t.role, []).append(t.run_id)
    return out


def read_view(view: Mapping[str, Any] | None) -> StoredView | None:
    """A stored view as typed records (``None`` when there is none or it cannot be read)."""
    if not isinstance(view, Mapping):
        return None
    try:
        if view.get("schema") == SCHEMA:
            if view.get("mode") == "ladder":
                return StoredView("ladder", ladder=LadderRecord.from_json(view["ladder"]))
            if view.get("mode") == "quality":
                return StoredView("quality", quality=QualityRecord.from_json(view["quality"]))
            return StoredView(
                "apply",
                record=ExperimentRecord.from_json(view["record"]),
                evidence=view.get("evidence") or {},
            )
        return _schema_one(view)
    except (KeyError, TypeError, ValueError):
        return None


def _schema_one(view: Mapping[str, Any]) -> StoredView:
    """A view written before the record existed: its summary (an Apply) or its rows (a ladder)."""
    if view.get("mode") == "ladder":
        changes = {(c.get("round"), c.get("fix")): c for c in view.get("changes") or []}
        rounds = baseline_moves(
            tuple(
                _old_row(r, changes.get((r.get("round"), r.get("fix")), {}))
                for r in view.get("rows") or []
            )
        )
        last = view.get("last_bottleneck")
        return StoredView(
            "ladder",
            ladder=LadderRecord(
                rounds=rounds,
                total_speedup=float(view.get("total_speedup") or 1.0),
                rounds_asked=None,
                why_stopped=why_stopped(rounds, None, last),
                complete=complete(rounds, None),
                last_bottleneck=last,
            ),
        )
    s = view.get("summary") or {}
    said = from_text(
        bool(view.get("kept")), view.get("reason"), s.get("not_applied"), s.get("speedup")
    )
    change = view.get("script_change") or {}
    bound = view.get("upper_bound")
    return StoredView(
        "apply",
        record=ExperimentRecord(
            kind="apply",
            fix_id=str(view.get("fix_id") or ""),
            fix_title=str(view.get("fix") or ""),
            bottleneck="",
            outcome=said.word.value,  # type: ignore[arg-type]
            outcome_text=render(said),
            reason=str(view.get("reason") or ""),
            outcome_why=said.why.value,
            before_samples_per_s=s.get("before_samples_per_s"),
            after_samples_per_s=s.get("after_samples_per_s"),
            speedup=s.get("speedup"),
            low=s.get("low"),
            high=s.get("high"),
            level=s.get("level") or 0.95,
            pair_ratios=tuple(s.get("pair_ratios") or ()),
            before_step_ms=s.get("before_ms"),
            after_step_ms=s.get("after_ms"),
            bound=BoundRecord(
                bound, None, "the diagnosis shown when it was applied (stored by an older Stepwise)"
            )
            if isinstance(bound, (int, float))
            else None,
            not_applied=s.get("not_applied"),
            inconclusive=s.get("inconclusive"),
            trials_per_arm=s.get("trials") or 3,
            spec_change=s.get("spec_change") or {},
            injected=bool(s.get("injected")),
            where=change.get("where"),
            change=change.get("change"),
        ),
        evidence={k: view.get(k) or {} for k in ("step_samples", "breakdowns", "loss_curves")},
    )


def _old_row(r: Mapping[str, Any], change: Mapping[str, Any]) -> ExperimentRecord:
    reason = r.get("reason")
    said = from_text(
        bool(r.get("kept")),
        reason,
        reason if r.get("verdict") == "not applied" else None,
        r.get("speed-up"),
    )
    interval = r.get("interval") or ""
    low, high = (float(x) for x in interval.strip("[]").split(", ")) if interval else (None, None)
    bound = r.get("upper bound")
    return ExperimentRecord(
        kind="ladder round",
        round=r.get("round"),
        fix_id=str(change.get("fix_id") or r.get("fix") or ""),
        fix_title=str(r.get("fix") or ""),
        bottleneck=str(r.get("bottleneck") or ""),
        rule=r.get("rule"),
        outcome=said.word.value,  # type: ignore[arg-type]
        outcome_text=render(said),
        reason=str(reason or ""),
        outcome_why=said.why.value,
        before_samples_per_s=r.get("before samples/s"),
        after_samples_per_s=r.get("after samples/s"),
        speedup=r.get("speed-up"),
        low=low,
        high=high,
        before_step_ms=r.get("before ms"),
        after_step_ms=r.get("after ms"),
        cumulative_speedup=r.get("cumulative") if r.get("kept") else None,
        bound=BoundRecord(bound, None, f"the diagnosis of round {r.get('round')}'s baseline run")
        if isinstance(bound, (int, float)) and math.isfinite(bound)
        else None,
        where=change.get("where"),
        change=change.get("change"),
    )


def _json_safe(value: Mapping[str, Any]) -> dict[str, Any]:
    """Plain JSON types only: NaN/inf become None, numpy and other scalars their Python value."""
    data = orjson.loads(
        orjson.dumps(
            _finite(value), default=str, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
        )
    )
    assert isinstance(data, dict)
    return data


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
