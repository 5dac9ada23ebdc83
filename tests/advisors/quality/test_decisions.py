"""Time-to-quality decisions on recorded curves with a fake clock (tests/advisors/quality/recorded.py)."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pytest

from advisors.experiments.to_quality import QualityRun, QualitySpec, to_quality
from advisors.quality import candidates as cands
from advisors.quality.script_candidates import templates
from advisors.quality.arms import ArmTime, compare, olympic
from advisors.quality.curve import Curve, ema, loss_curve_from_steps, smoothed, time_to_target
from advisors.quality.early_stop import measure, stop_point
from advisors.quality.target import Budget, Target, baseline_value
from tests.advisors.quality.recorded import (
    Recipe,
    applied_injection,
    recipe_of,
    record,
    resolved,
    script,
    write_injected,
)

BASE = script()
patch_workload = applied_injection  # a resolved candidate's knobs, injected into the script's arms


def fake_runner(plateau_at: float | None = None):
    """A CurveRunFn: the arm's injected batch, rate and accumulation drive the recorded model; stops at the
    target."""

    def run(spec: QualitySpec, stop_at: Target | None) -> QualityRun:
        frame = record(
            recipe_of(spec, plateau_at),
            spec.measure_steps,
            spec.seed,
            stop_below=stop_at.value if stop_at else None,
        )
        stopped = "it reached the target" if len(frame) < spec.measure_steps else None
        run_dir = Path(tempfile.mkdtemp(prefix="recorded-run-"))
        write_injected(
            run_dir, spec.inject
        )  # the script's optimizer and loader, as the agent records them
        return QualityRun(
            "killed" if stopped else "ok",
            loss_curve_from_steps(frame),
            str(run_dir),
            stopped=stopped,
            median_step_ms=float(frame["wall_ms"].median()),
        )

    return run


def test_larger_batch_with_linearly_scaled_lr_reaches_the_target_sooner_and_is_kept() -> None:
    cand = resolved(0)
    assert (
        cand.patch == {"batch_scale": 4, "lr_scale": pytest.approx(4.0)}
        and cand.id == "batch_x4_linear_lr"
    )
    ladder = to_quality(
        BASE, [cand], fake_runner(), Budget(steps=400), seeds=5, apply=patch_workload
    )
    assert ladder.target.source == "baseline curve" and ladder.target.goal == "min"
    rnd = ladder.rounds[0]
    ttt = rnd.time_to_target
    assert ttt is not None and rnd.kept and ttt.kept
    out = ttt.to_json()
    assert out["reached_before"] == out["reached_after"] == out["seeds"] == 5
    assert ttt.ratio is not None and ttt.ratio > 1.5
    assert ttt.interval is not None and ttt.interval[0] > 1.03
    assert rnd.reason.startswith("kept")
    # the arm stopped at the target instead of running its whole budget
    assert all(r.stopped == "it reached the target" for r in rnd.runs)


def test_gradient_accumulation_is_slower_to_the_target_and_rejected() -> None:
    cand = resolved(1)
    assert cand.patch == {"grad_accum": 4, "lr_scale": pytest.approx(4.0)}
    ladder = to_quality(
        BASE, [cand], fake_runner(), Budget(steps=400), seeds=5, apply=patch_workload
    )
    rnd = ladder.rounds[0]
    assert rnd.time_to_target is not None and not rnd.kept
    assert rnd.time_to_target.ratio is not None and rnd.time_to_target.ratio < 1
    assert "slower to the same quality" in rnd.reason


def test_early_stopping_on_a_plateau_is_a_trade_off_left_to_the_user_without_a_target() -> None:
    ladder = to_quality(
        BASE, [cands.early_stopping()], fake_runner(plateau_at=1.0), Budget(steps=600), seeds=3
    )
    rnd = ladder.rounds[0]
    es = rnd.early_stopping
    assert (
        es is not None
        and not rnd.kept
        and rnd.outcome == "trade-off"
        and rnd.time_to_target is None
    )
    # the saving is the recorded clock's tail after the stop, seed by seed
    for p, run in zip(es.points, ladder.baseline):
        assert p.stop_s is not None and p.saved_s == pytest.approx(run.curve.end_s - p.stop_s)
    assert es.saved_share > 0.3
    step = int(sorted(p.stop_step or 0 for p in es.points)[1])
    assert (
        f"trade-off: stopping at step {step} " in rnd.reason
        and f"saves {es.saved_share:.0%} of the time" in rnd.reason
    )
    assert "instead of" in rnd.reason and "your call" in rnd.reason


def test_early_stopping_on_a_falling_curve_saves_nothing_and_is_rejected() -> None:
    frame = record(Recipe(), 100, seed=0)
    es = measure([smoothed(loss_curve_from_steps(frame))], "min")
    assert not es.kept and es.saved_s == 0.0 and "still improving" in es.reason


def test_a_run_that_never_reaches_the_target_fails_its_arm_said_plainly() -> None:
    cand = resolved(0)
    ladder = to_quality(
        BASE,
        [cand],
        fake_runner(),
        Budget(steps=100),
        seeds=3,
        target_value=0.05,
        apply=patch_workload,
    )
    assert ladder.target.source == "given" and ladder.target.value == 0.05
    ttt = ladder.rounds[0].time_to_target
    assert ttt is not None and not ttt.kept and ttt.ratio is None
    assert ttt.before.failed and ttt.after.failed
    assert ttt.reason.startswith("neither arm reached the target")
    assert ttt.to_json()["reached_before"] == 0


def test_with_a_given_target_the_baseline_stops_there_unless_early_stopping_needs_its_tail() -> (
    None
):
    cand = resolved(0)
    alone = to_quality(
        BASE,
        [cand],
        fake_runner(),
        Budget(steps=400),
        seeds=3,
        target_value=1.0,
        apply=patch_workload,
    )
    assert all(r.stopped == "it reached the target" for r in alone.baseline)
    both = to_quality(
        BASE,
        [cand, cands.early_stopping()],
        fake_runner(),
        Budget(steps=400),
        seeds=3,
        target_value=1.0,
        apply=patch_workload,
    )
    assert all(r.stopped is None and len(r.curve) == 400 for r in both.baseline)
    assert (
        both.rounds[0].time_to_target is not None
        and both.rounds[0].time_to_target.before.reached == 3
    )


def test_two_misses_fail_an_arm_one_miss_counts_as_the_slowest() -> None:
    assert olympic([3.0, 1.0, None, 2.0]) == pytest.approx(2.5)  # drop 1.0 and the miss
    assert olympic([1.0, None, None, 2.0]) is None
    assert olympic([1.0, 5.0, 3.0]) == pytest.approx(3.0)
    failed = compare(ArmTime((1.0, 1.1, 1.2)), ArmTime((0.5, None, None)))
    assert failed.after.failed and not failed.kept and "the change failed" in failed.reason


def test_the_interval_comes_from_the_seeds_and_gates_the_verdict() -> None:
    noisy = compare(ArmTime((10.0, 10.5, 11.0)), ArmTime((5.0, 16.0, 9.0, 10.0)))
    assert (
        noisy.interval is not None and noisy.interval[0] < 1 < noisy.interval[1] and not noisy.kept
    )
    clear = compare(ArmTime((10.0, 10.5, 11.0, 10.2)), ArmTime((5.0, 5.2, 5.1, 4.9)))
    assert clear.kept and clear.ratio == pytest.approx(10.35 / 5.05, rel=1e-6)


def test_target_from_the_baseline_curve_at_a_fraction_of_its_budget() -> None:
    c = Curve(times_s=(1, 2, 3, 4), values=(4.0, 3.0, 2.0, 1.0), steps=(25, 50, 75, 100), end_s=4.0)
    assert baseline_value([c], Budget(steps=100), 0.8) == 2.0
    assert baseline_value([c], Budget(seconds=4.0), 0.5) == 3.0


def test_ema_is_debiased_and_time_to_target_takes_the_first_point_past_it() -> None:
    assert ema([2.0, 2.0, 2.0]) == pytest.approx((2.0, 2.0, 2.0))
    c = Curve((0.5, 1.0, 1.5), (3.0, 2.0, 1.0), (1, 2, 3), 1.5)
    assert time_to_target(c, 2.0, "min") == 1.0 and time_to_target(c, 0.5, "min") is None
    assert time_to_target(c, 3.0, "max") == 0.5


def test_plateau_stop_point_reads_the_recorded_clock() -> None:
    frame = record(Recipe(plateau_at=1.0), 500, seed=1)
    curve = smoothed(loss_curve_from_steps(frame))
    p = stop_point(curve, "min", patience=20)
    assert p.stop_s is not None and 0 < p.stop_s < curve.end_s
    # the clock runs from the end of the first step (which, in a launched script, holds its start-up)
    assert curve.times_s[0] == 0.0
    assert curve.end_s == pytest.approx(
        (frame["t_unix_ns"].iloc[-1] - frame["t_unix_ns"].iloc[0]) / 1e9
        + (frame["wall_ms"].iloc[-1] - frame["wall_ms"].iloc[0]) / 1e3
    )


def test_the_script_candidates_are_templates_until_the_baseline_has_run() -> None:
    script = (
        templates()
    )  # made concrete from the script's baseline run: advisors.quality.script_candidates
    assert [(c.patch or {}).get("kind") for c in script] == [
        "batch",
        "grad_accum",
        "optimizer_swap",
        None,
        None,
    ]
    assert (
        script[-1].id == "early_stopping"
        and script[-2].patch is None
        and "not in PyTorch" in script[-2].advice
    )
    assert resolved(2).patch == {"optimizer_swap": "adamw"}  # SGD → AdamW at PyTorch's default rate


def test_budget_parse() -> None:
    assert Budget.parse("300") == Budget(steps=300) and Budget.parse("300steps") == Budget(
        steps=300
    )
    assert Budget.parse("90s") == Budget(seconds=90.0) and Budget.parse("2m") == Budget(
        seconds=120.0
    )
    with pytest.raises(ValueError):
        Budget.parse("soon")
    assert math.isclose(Budget.parse("1h").seconds or 0, 3600)
