"""Real runs through the to-quality path (slow): a workload's arm (its training script) stopped at its target, and a
script's printed metric read back with the times the agent recorded. No claim on which arm wins: these check the
plumbing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from advisors.experiments.to_quality import arm_spec, store_curve_runner, to_quality
from advisors.quality import candidates as cands
from advisors.quality.script_candidates import templates
from advisors.quality.target import Budget, Target
from cli.workloads import workload_spec
from profilers.run.script_spec import MAX_STEPS, ScriptSpec
from profilers.store.runs import RunStore
from tests.advisors.quality.recorded import applied_injection, resolve_from_runs

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "scripts" / "digits_quality_train.py"
pytestmark = pytest.mark.slow


def test_a_workload_arm_is_stopped_once_it_reaches_the_target(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    spec = workload_spec(store.root, "digits", measure_steps=MAX_STEPS, seeded=True)
    # A budget no run finishes before a poll sees the target, however loaded the machine: with 400 steps the run
    # could end (a second or two of tiny steps) before a starved watcher's next look, and then it had not been
    # stopped (the clean-clone suite saw it, beside two other test runs).
    budget = Budget(steps=MAX_STEPS)
    run = store_curve_runner(store, budget, poll_s=0.2)
    easy = Target(
        "training loss", 2.0, "min", "given"
    )  # the EMA passes 2.0 within the first few dozen steps
    arm = arm_spec(spec, budget, 2)
    assert arm.command[-2:] == (
        "--seed",
        "2",
    )  # the workload reseeds from its own flag: each seed goes there
    out = run(arm, easy)
    assert out.stopped == "it reached the target" and out.status == "killed" and out.ok
    assert 0 < len(out.curve) < MAX_STEPS


def test_to_quality_on_a_workload_writes_the_round(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    spec = workload_spec(store.root, "digits", measure_steps=MAX_STEPS, seeded=True)
    budget = Budget(steps=40)
    ladder = to_quality(
        spec,
        [templates(k=2)[0], cands.early_stopping()],
        store_curve_runner(store, budget),
        budget,
        seeds=1,
        apply=applied_injection,
        resolve=resolve_from_runs,
    )
    assert ladder.target.source == "baseline curve" and len(ladder.baseline[0].curve) == 40
    batch = ladder.rounds[0]
    assert (
        batch.candidate.id == "batch_x2_linear_lr" and batch.time_to_target is not None
    )  # the script's SGD
    assert ladder.rounds[1].early_stopping is not None


def test_a_scripts_printed_metric_comes_back_with_its_times(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    spec = ScriptSpec(command=(sys.executable, str(SCRIPT), "--steps", "1000", "--eval-every", "5"))
    budget = Budget(steps=30)
    run = store_curve_runner(store, budget, metric=r"val_acc=([0-9.]+)")
    out = run(arm_spec(spec, budget, 0), None)
    c = out.curve
    assert (
        out.status == "ok" and len(c) >= 5
    )  # one line every 5 steps, block-buffered stdout notwithstanding
    assert list(c.times_s) == sorted(c.times_s) and 0 < c.times_s[-1] <= c.end_s + 1.0
    assert all(0.0 <= v <= 1.0 for v in c.values) and c.steps[0] >= 5
