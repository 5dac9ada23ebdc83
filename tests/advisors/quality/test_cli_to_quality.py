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
    def runner(
        store: Any, budget: Budget, metric: str | None = None, experiment: str | None = None
    ) -> Any:
        return fake_runner()

    monkeypatch.setattr(oq, "store_curve_runner", runner)


@pytest.mark.slow
def test_json_contract_for_a_workload(
    tmp_path: Path, recorded_runs: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code = advisors_main(
        [
            "optimize",
            "digits",
            "--to-quality",
            "--budget",
            "400",
            "--seeds",
            "3",
            "--store",
            str(tmp_path),
            "--price-per-hour",
            "2.5",
            "--full-run-steps",
            "100000",
            "--json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert (
        set(out["target"]) >= {"metric", "value", "goal", "source"}
        and out["target"]["source"] == "baseline curve"
    )
    by_fix = {r["fix"]: r for r in out["rounds"]}
    assert "early_stopping" in by_fix and by_fix["early_stopping"]["time_to_target"] is None
    ttt = by_fix["batch_x4_linear_lr"]["time_to_target"]
    assert set(ttt) >= {
        "before_s",
        "after_s",
        "ratio",
        "interval",
        "seeds",
        "reached_before",
        "reached_after",
    }
    assert ttt["seeds"] == 3 and by_fix["batch_x4_linear_lr"]["kept"] is True
    assert by_fix["grad_accum_x4_linear_lr"]["kept"] is False
    proj = out["projection"]
    assert (
        proj["steps"] == 100000 and proj["hours_after"] < proj["hours"] and proj["cost"] is not None
    )
    assert out["total_speedup"] == pytest.approx(
        max(r["speedup"] for r in out["rounds"] if r["kept"])
    )
    # stored: one experiment whose report.json is the printed JSON
    [(exp_id, path)] = oq.stored_reports(oq.RunStore(tmp_path))
    assert (
        exp_id == out["experiment_id"] and json.loads(path.read_text())["target"] == out["target"]
    )


def test_bad_flags_are_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        advisors_main(
            ["optimize", "digits", "--to-quality", "--budget", "soon", "--store", str(tmp_path)]
        )
        == 2
    )
    assert capsys.readouterr().err.startswith("error: --budget")
    assert (
        advisors_main(
            ["optimize", "digits", "--to-quality", "--metric", "acc=\\d+", "--store", str(tmp_path)]
        )
        == 2
    )
    assert "exactly one" in capsys.readouterr().err


def test_a_kept_step_time_fix_on_a_script_is_re_judged_by_the_printed_metric(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from advisors.experiments.to_quality import QualityRun
    from advisors.quality.curve import printed_curve
    from profilers.run.script_spec import ScriptSpec

    def runner(
        store: Any, budget: Budget, metric: str | None = None, experiment: str | None = None
    ) -> Any:
        def run(spec: Any, stop_at: Any) -> QualityRun:
            assert isinstance(spec, ScriptSpec) and metric is not None
            pace = (
                0.5 if spec.inject.get("autocast") == "bf16" else 1.0
            )  # the injected fix halves each step
            lines = [(pace * i, f"val_acc={min(0.95, 0.1 * i):.2f}") for i in range(1, 40)]
            return QualityRun("ok", printed_curve(lines, metric, end_s=pace * 40))

        return run

    monkeypatch.setattr(oq, "store_curve_runner", runner)
    script = str(
        Path(__file__).resolve().parents[3] / "benchmarks" / "scripts" / "digits_quality_train.py"
    )
    code = advisors_main(
        [
            "optimize",
            "--to-quality",
            "--metric",
            r"val_acc=([0-9.]+)",
            "--goal",
            "max",
            "--target",
            "0.9",
            "--fix",
            "bf16_autocast",
            "--store",
            str(tmp_path),
            "--json",
            "--",
            "python",
            script,
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["target"] == {
        "metric": r"val_acc=([0-9.]+)",
        "value": 0.9,
        "goal": "max",
        "source": "printed metric",
        "note": "--target 0.9",
    }
    first = out["rounds"][0]
    assert first["fix"] == "bf16_autocast" and first["kept"]
    assert first["time_to_target"]["ratio"] == pytest.approx(2.0)
    # recorded runs leave no injected.json: the convergence changes cannot be made concrete, and say so
    assert [a["id"] for a in out["advice"]] == [
        "batch_x4_lr",
        "grad_accum_x4",
        "optimizer_swap",
        "optimizer_lamb_lars",
    ]
    assert all("no record" in a["advice"] for a in out["advice"][:3])
    assert first["applied"] is None and first["not_applied"] is None
