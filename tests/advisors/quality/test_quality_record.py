"""A to-quality experiment's one typed record (issue 41/43): taken from its JSON, stored as its view and read back
through ``stored_view`` for the Runs list's label; the predicted and measured parts are the JSON's own."""

from __future__ import annotations

import pytest

from advisors.experiments.results.quality_record import QualityRecord, quality_record
from advisors.experiments.results.stored_view import quality_view, read_view
from tests.reports.quality.test_quality_report import recorded


def test_the_record_carries_each_rounds_outcome_and_survives_the_store() -> None:
    out = recorded(plateau_at=1.0)
    rec = quality_record(out)
    assert [r.outcome for r in rec.rounds] == [r["outcome"] for r in out["rounds"]]
    batch, stop = rec.rounds
    assert batch.ratio == pytest.approx(out["rounds"][0]["time_to_target"]["ratio"])
    assert stop.outcome == "trade-off" and stop.reason == out["rounds"][1]["reason"]
    seen = read_view(quality_view(rec))
    assert seen is not None and seen.mode == "quality" and seen.quality == rec
    assert seen.label == rec.label and seen.trials == ()
    if batch.outcome == "kept":
        assert rec.label == f"to quality: kept {batch.ratio:.2f}×"


def test_predicted_and_measured_parts_are_the_jsons() -> None:
    out = recorded()
    out["rounds"][0]["predicted"] = {"steps_ratio": 0.5, "step_time_ratio": 1.6, "time_ratio": 0.8}
    out["rounds"][0]["measured"] = {"steps_ratio": 0.55, "step_time_ratio": 1.5, "time_ratio": 0.9}
    rec = quality_record(out)
    p, m = rec.rounds[0].predicted, rec.rounds[0].measured
    assert p is not None and m is not None
    assert p.text == "steps × 0.50 · step time × 1.60 = time × 0.80" and m.step_time_ratio == 1.5


def test_an_unknown_outcome_is_not_read_back() -> None:
    raw = quality_record(recorded()).to_json()
    raw["rounds"][0]["outcome"] = "great"
    assert read_view({"schema": 2, "mode": "quality", "quality": raw}) is None
    with pytest.raises(ValueError):
        QualityRecord.from_json(raw)
