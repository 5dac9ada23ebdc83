"""``optimize --to-quality --json``: the contract, with the runs replaced by recorded curves (fake clock)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import cli.optimize_quality as oq
from advisors.quality.target import Budget
from cli.advisors import main as advisors_main
from tests.advisors.quality.test_decisions import fake_runner


@pytest.fixture
def recorded_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def runner(store: Any, budget: Budget, metric: str | None = None, experiment: str | None = None) -> Any:
        return fake_runner()

    monkeypatch.setattr(oq, "store_curve_runner", runner)


def test_json_contract_for_a_workload(tmp_path: Path, recorded_runs: None, capsys: pytest.CaptureFixture[str]) -> None:
    code = advisors_main(["optimize", "digits", "--to-quality", "--budget", "400", "--seeds", "3", "--store",
                          str(tmp_path), "--price-per-hour", "2.5", "--full-run-steps", "100000", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["target"]) >= {"metric", "value", "goal", "source"} and out["target"]["source"] == "baseline curve"
    by_fix = {r["fix"]: r for r in out["rounds"]}
    assert "early_stopping" in by_fix and by_fix["early_stopping"]["time_to_target"] is None
    ttt = by_fix["batch_x4_linear_lr"]["time_to_target"]
    assert set(ttt) >= {"before_s", "after_s", "ratio", "interval", "seeds", "reached_before", "reached_after"}
    assert ttt["seeds"] == 3 and by_fix["batch_x4_linear_lr"]["kept"] is True
    assert by_fix["grad_accum_x4_linear_lr"]["kept"] is False
    proj = out["projection"]
    assert proj["steps"] == 100000 and proj["hours_after"] < proj["hours"] and proj["cost"] is not None
    assert out["total_speedup"] == pytest.approx(max(r["speedup"] for r in out["rounds"] if r["kept"]))
    # stored: one experiment whose report.json is the printed JSON
    [(exp_id, path)] = oq.stored_reports(oq.RunStore(tmp_path))
    assert exp_id == out["experiment_id"] and json.loads(path.read_text())["target"] == out["target"]


def test_bad_flags_are_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert advisors_main(["optimize", "digits", "--to-quality", "--budget", "soon", "--store", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: --budget")
    assert advisors_main(["optimize", "digits", "--to-quality", "--metric", "acc=\\d+", "--store",
                          str(tmp_path)]) == 2
    assert "exactly one" in capsys.readouterr().err
