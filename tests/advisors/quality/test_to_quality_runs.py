"""Real runs through the to-quality path (slow): a workload's arm stopped at its target, and a script's printed
metric read back with the times the agent recorded. No claim on which arm wins: these check the plumbing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from advisors.experiments.to_quality import arm_spec, patch_workload, store_curve_runner, to_quality
from advisors.quality import candidates as cands
from advisors.quality.target import Budget, Target
from profilers.run.script_spec import ScriptSpec
from profilers.store.runs import RunStore
from sample_runs import get_workload

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "scripts" / "digits_quality_train.py"
pytestmark = pytest.mark.slow


def test_a_workload_arm_is_stopped_once_it_reaches_the_target(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    spec = get_workload("digits").spec("tiny")
    # A budget no run finishes before a poll sees the target, however loaded the machine: with 400 steps the run
    # could end (a second or two of tiny steps) before a starved watcher's next look, and then it had not been
    # stopped (the clean-clone suite saw it, beside two other test runs).
    budget = Budget(steps=200_000)
    run = store_curve_runner(store, budget, poll_s=0.2)
    easy = Target("training loss", 2.0, "min", "given")  # the EMA passes 2.0 within the first few dozen steps
    out = run(arm_spec(spec, budget, 0), easy)
    assert out.stopped == "it reached the target" and out.status == "killed" and out.ok
    assert 0 < len(out.curve) < 200_000


def test_to_quality_on_a_workload_writes_the_round(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    spec = get_workload("digits").spec("tiny")
    budget = Budget(steps=40)
    ladder = to_quality(spec, [cands.batch_scaled(spec, 2, "sqrt"), cands.early_stopping()],
                        store_curve_runner(store, budget), budget, seeds=1, apply=patch_workload)
    assert ladder.target.source == "baseline curve" and len(ladder.baseline[0].curve) == 40
    assert ladder.rounds[0].time_to_target is not None and ladder.rounds[1].early_stopping is not None


def test_a_scripts_printed_metric_comes_back_with_its_times(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    spec = ScriptSpec(command=(sys.executable, str(SCRIPT), "--steps", "1000", "--eval-every", "5"))
    budget = Budget(steps=30)
    run = store_curve_runner(store, budget, metric=r"val_acc=([0-9.]+)")
    out = run(arm_spec(spec, budget, 0), None)
    c = out.curve
    assert out.status == "ok" and len(c) >= 5  # one line every 5 steps, block-buffered stdout notwithstanding
    assert list(c.times_s) == sorted(c.times_s) and 0 < c.times_s[-1] <= c.end_s + 1.0
    assert all(0.0 <= v <= 1.0 for v in c.values) and c.steps[0] >= 5
