"""A script's metric read from its printed output, placed on the run's clock (fake clock throughout)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from advisors.experiments.to_quality import QualityRun, QualitySpec, curve_of, to_quality
from advisors.quality.script_candidates import templates
from advisors.quality.curve import compile_metric, printed_curve
from advisors.quality.target import Budget, Target
from profilers.run.script_spec import ScriptSpec
from stepwise_agent.printed import tap_stdout
from tests.fake_clock import FakeClock

METRIC = r"val_acc[=:]\s*([0-9.]+)"


def test_the_tee_records_each_printed_line_with_its_time_and_passes_it_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = FakeClock()
    untap = tap_stdout(tmp_path, clock.time_ns)
    try:
        print("epoch 1 val_acc=0.50")
        clock.advance(2.0)
        sys.stdout.write("epoch 2 ")
        clock.advance(0.5)
        sys.stdout.write("val_acc=0.75\nno newline at the end")
    finally:
        untap()
    assert "epoch 1 val_acc=0.50" in capsys.readouterr().out
    rows = [json.loads(x) for x in (tmp_path / "printed.jsonl").read_text().splitlines()]
    assert [r["line"] for r in rows] == [
        "epoch 1 val_acc=0.50",
        "epoch 2 val_acc=0.75",
        "no newline at the end",
    ]
    assert (rows[1]["t_unix_ns"] - rows[0]["t_unix_ns"]) / 1e9 == pytest.approx(2.5)


def test_curve_of_a_run_folder_puts_printed_values_on_the_steps_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    steps, printed = [], []
    for step in range(30):
        start = clock.time_ns()
        wall_s = 5.0 if step == 0 else 0.1  # the first step holds the script's start-up
        clock.advance(wall_s)
        steps.append(
            {
                "rank": 0,
                "step": step,
                "wall_ms": wall_s * 1e3,
                "loss": 1.0,
                "samples": 8,
                "profiled": False,
                "t_unix_ns": start,
            }
        )
        if step % 10 == 9:
            printed.append(
                {
                    "t_unix_ns": clock.time_ns(),
                    "line": f"step {step} val_acc: {0.5 + step / 100:.2f}",
                }
            )
    (tmp_path / "printed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in printed))
    c = curve_of(tmp_path, pd.DataFrame(steps), METRIC)
    assert c.values == pytest.approx((0.59, 0.69, 0.79))
    assert c.times_s == pytest.approx((0.9, 1.9, 2.9)) and c.steps == (10, 20, 30)


def test_a_metric_needs_one_number_group() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        compile_metric(r"acc=[0-9.]+")
    c = printed_curve([(1.0, "acc=nan"), (2.0, "acc=0.9"), (3.0, "acc=x")], r"acc=(\S+)", end_s=4.0)
    assert c.values == (0.9,) and c.end_s == 4.0


def test_to_quality_on_a_script_judges_early_stopping_on_the_printed_accuracy() -> None:
    spec = ScriptSpec(command=("python", __file__))

    def run(s: QualitySpec, stop_at: Target | None) -> QualityRun:
        assert isinstance(s, ScriptSpec) and s.measure_steps == 200 and s.warmup_steps == 0
        lines = [
            (0.1 * i, f"eval val_acc={min(0.9, 0.5 + 0.02 * i) + 0.001 * s.seed:.3f}")
            for i in range(1, 101)
        ]
        return QualityRun("ok", printed_curve(lines, METRIC, end_s=10.0))

    ladder = to_quality(
        spec, templates(), run, Budget(steps=200), seeds=3, goal="max", metric=METRIC
    )
    assert ladder.target.source == "printed metric" and ladder.target.metric == METRIC
    assert ladder.target.goal == "max" and ladder.target.value == pytest.approx(0.901)
    [es_round] = ladder.rounds
    assert es_round.outcome == "trade-off" and es_round.early_stopping is not None
    assert es_round.early_stopping.saved_s > 4.0  # accuracy flat from 2 s, the run went on to 10 s
    # without an apply (no launcher here) the injectable ones are advice too: change it yourself
    assert [a.id for a in ladder.advice] == [
        "batch_x4_lr",
        "grad_accum_x4",
        "optimizer_swap",
        "optimizer_lamb_lars",
    ]
