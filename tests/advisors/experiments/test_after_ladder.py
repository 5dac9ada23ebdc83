"""A ladder's final findings never re-propose a fix it measured as no gain: they show the measurement."""

from __future__ import annotations

from advisors.experiments.after_ladder import final_diagnosis_json, measured_no_gain
from advisors.experiments.results.ladder_report import ladder_json
from advisors.experiments.optimize import optimize
from tests.advisors.fake_script import BASE
from tests.advisors.experiments.test_experiment import (
    FAST,
    FakeRunner,
    FakeStrategy,
    _fake_diagnose,
)


def _proposed(doc: dict) -> set[str]:
    return {
        f["fix"]["id"] for g in doc["findings"] for f in (g, *g.get("rules", [])) if f.get("fix")
    }


def test_final_findings_show_the_measurement_instead_of_the_rejected_fix() -> None:
    fake = (
        FakeRunner()
    )  # more workers: 98 ms instead of 100 (no real gain); a decoded-sample cache: 20 ms
    ladder = optimize(
        BASE,
        fake,
        rounds=1,
        policy=FAST,
        diagnose_run=_fake_diagnose(fake),
        strategy=FakeStrategy(),
    )
    assert [(r.experiment.fix.id, r.experiment.kept) for r in ladder.rungs][:1] == [
        ("dataloader_workers", False)
    ]
    assert ladder.last_diagnosis is not None  # round 1's diagnosis, which proposed more workers
    from advisors.diagnosis import diagnosis_json

    assert "dataloader_workers" in _proposed(
        diagnosis_json(ladder.last_diagnosis)
    )  # the raw diagnosis would
    assert set(measured_no_gain(ladder)) >= {"dataloader_workers"}
    final = final_diagnosis_json(ladder)
    assert final is not None and "dataloader_workers" not in _proposed(final)
    shown = [
        f["measured"]
        for g in final["findings"]
        for f in (g, *g.get("rules", []))
        if f.get("measured")
    ]
    assert any(
        m["fix"] == "dataloader_workers" and m["verdict"] == "no gain" and m["interval"]
        for m in shown
    )
    assert all(x["fix"] != "dataloader_workers" for x in final["ranking"]["fix_order"])
    assert ladder_json(ladder)["final_diagnosis"] == final


def test_a_kept_gain_above_its_bound_says_the_bound_was_wrong() -> None:
    from advisors.experiments.results.ladder_report import ladder_table

    fake = (
        FakeRunner()
    )  # the cache takes the step from 100 to 20 ms: 5x, above the loader's 2.5x bound
    ladder = optimize(
        BASE,
        fake,
        rounds=1,
        policy=FAST,
        diagnose_run=_fake_diagnose(fake),
        strategy=FakeStrategy(),
    )
    rounds = ladder_json(ladder)["rounds"]
    kept = [r for r in rounds if r["kept"]]
    assert kept and kept[0]["bound_exceeded"] is True and kept[0]["upper_bound_speedup"] == 2.5
    assert not any(
        r["bound_exceeded"] for r in rounds if not r["kept"] and r["speedup"] and r["speedup"] < 2.5
    )
    line = next(x for x in ladder_table(ladder) if "cache_decoded" in x)
    assert "(upper bound 2.50×" in line and "is above it: the bound was wrong" in line
    # the same, as a field: never a bare bound beside a larger gain
    beyond = kept[0]["beyond_bound"]
    assert beyond["bound"] == 2.5 and beyond["measured"] == kept[0]["speedup"]
    assert "bound was wrong" in beyond["why"]
