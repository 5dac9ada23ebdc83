"""Predictions from the noise scale and the choices they make, on recorded curves (tests/advisors/quality/recorded.py)
and noise-scale rows whose B_simple is known: rows at the expected squared norms E|g_B|² = |G|² + tr Σ / B."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dataclasses import replace

from advisors.experiments.to_quality import QualityRun, QualitySpec, to_quality
from advisors.experiments.to_quality_goodput import planner
from advisors.experiments.to_quality_report import quality_json, quality_table
from advisors.quality import candidates as cands
from advisors.quality.script_candidates import templates
from advisors.quality.curve import loss_curve_from_steps
from advisors.quality.goodput import efficiency, predict, steps_ratio
from advisors.quality.noise_scale import estimate
from advisors.quality.target import Budget, Target
from tests.advisors.quality.recorded import (
    OVERHEAD_MS,
    PER_SAMPLE_MS,
    applied_injection,
    recipe_of,
    record,
    resolve_from_runs,
    resolved,
    script,
    write_injected,
)

BASE = script()
patch_workload = applied_injection


def rows_for(
    b_noise: float, batch: int, windows: int = 40, window: int = 4
) -> list[dict[str, Any]]:
    g2, trace = 1.0, b_noise  # B_simple = tr Σ / |G|² in samples
    return [
        {
            "window": window,
            "gap": 4,
            "sq_small": g2 + trace / batch,
            "sq_big": g2 + trace / (batch * window),
            "hook_s": 0.001,
            "wall_s": 0.1,
        }
        for _ in range(windows)
    ]


def fake_runner(tmp: Path, b_noise: float, plateau_at: float | None = None):
    """The recorded convergence model; each run's folder holds noise-scale rows of a known B_simple."""
    count = [0]

    def run(spec: QualitySpec, stop_at: Target | None) -> QualityRun:
        frame = record(
            recipe_of(spec, plateau_at),
            spec.measure_steps,
            spec.seed,
            stop_below=stop_at.value if stop_at else None,
        )
        count[0] += 1
        run_dir = tmp / f"run{count[0]}"
        run_dir.mkdir()
        (run_dir / "noise_scale.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows_for(b_noise, 32))
        )
        write_injected(
            run_dir, spec.inject
        )  # what the agent records of the script: its optimizer and training loader
        stopped = "it reached the target" if len(frame) < spec.measure_steps else None
        return QualityRun(
            "killed" if stopped else "ok",
            loss_curve_from_steps(frame),
            str(run_dir),
            stopped=stopped,
            median_step_ms=float(frame["wall_ms"].median()),
        )

    return run


def recorded_probe(spec: QualitySpec, k: int, steps: int = 12) -> float:
    """The recorded model's step cost at batch × k (what a throughput probe would measure on it)."""
    return OVERHEAD_MS + PER_SAMPLE_MS * 32 * k


def test_the_model_of_steps_and_efficiency() -> None:
    assert steps_ratio(64, 32, 32) == pytest.approx((1 + 0.5) / (1 + 1))
    assert steps_ratio(1e9, 32, 0.0) == pytest.approx(
        1.0
    )  # no noise: a bigger batch saves no steps
    assert efficiency(32, 32, 100) == 1.0 and efficiency(64, 32, 100) < 1
    p = predict(32, 320, {1: 10.0, 2: 12.0})[0]
    assert p.time_ratio == pytest.approx(
        steps_ratio(64, 32, 320) * 1.2
    ) and p.speedup == pytest.approx(1 / p.time_ratio)


def test_estimate_reads_b_simple_in_samples_with_its_cost() -> None:
    ns = estimate(rows_for(500.0, 32), 32)
    assert ns is not None and ns.b_simple == pytest.approx(500.0)
    assert ns.steps == 160 and ns.windows == 40
    assert ns.overhead == pytest.approx(
        0.001 / (0.1 * 2)
    )  # the hook's time over the window and its gap


def test_far_below_the_critical_batch_chooses_batch_scaling_and_it_is_kept(tmp_path: Path) -> None:
    ladder = to_quality(
        BASE,
        templates()[:1],
        fake_runner(tmp_path, 5000.0),
        Budget(steps=400),
        seeds=3,
        apply=patch_workload,
        planner=planner(recorded_probe),
        resolve=resolve_from_runs,
    )
    assert ladder.plan is not None and ladder.plan.plan is not None
    assert ladder.plan.noise is not None and ladder.plan.noise.b_simple == pytest.approx(5000.0)
    assert ladder.plan.plan.chosen == (2, 4, 8)
    assert "below the critical batch" in ladder.plan.plan.reason
    ids = [r.candidate.id for r in ladder.rounds]
    assert ids == [
        "batch_x2_linear_lr",
        "batch_x4_linear_lr",
        "batch_x8_linear_lr",
    ]  # the fixed × 4 pair replaced
    best = ladder.rounds[-1]
    assert best.kept and best.predicted is not None and best.predicted.time_ratio is not None
    assert best.predicted.time_ratio < 0.5
    out = quality_json(ladder)
    assert out["noise_scale"]["b_simple"] == pytest.approx(5000.0)
    assert set(out["noise_scale"]) >= {"b_simple", "interval", "steps", "overhead"}
    rnd = out["rounds"][-1]
    assert (
        set(rnd["predicted"]) >= {"steps_ratio", "time_ratio"}
        and rnd["time_to_target"]["ratio"] > 1
    )
    assert rnd["measured"]["time_ratio"] == pytest.approx(1 / rnd["time_to_target"]["ratio"])
    table = quality_table(out)
    assert (
        "critical batch" in table
        and "goodput-best batch 256" in table
        and "predicted steps ×" in table
    )


def test_far_above_the_critical_batch_gets_no_batch_candidate_with_the_reason(
    tmp_path: Path,
) -> None:
    ladder = to_quality(
        BASE,
        [*templates()[:1], cands.early_stopping()],
        fake_runner(tmp_path, 4.0),
        Budget(steps=200),
        seeds=3,
        apply=patch_workload,
        planner=planner(recorded_probe),
        resolve=resolve_from_runs,
    )
    assert (
        ladder.plan is not None and ladder.plan.plan is not None and ladder.plan.plan.chosen == ()
    )
    assert "above the critical batch" in ladder.plan.plan.reason
    assert not any(r.candidate.id.startswith("batch_x") for r in ladder.rounds)
    out = quality_json(ladder)
    assert out["noise_scale"]["plan"]["above_critical"] is True
    assert out["noise_scale"]["plan"]["goodput_best_batch"] == 32


def test_accumulation_gets_the_large_batchs_steps_at_k_times_the_step(tmp_path: Path) -> None:
    ladder = to_quality(
        BASE,
        [resolved(1)],
        fake_runner(tmp_path, 5000.0),
        Budget(steps=400),
        seeds=3,
        apply=patch_workload,
        planner=planner(recorded_probe, ks=(4,)),
    )
    rnd = next(r for r in ladder.rounds if r.candidate.id.startswith("grad_accum"))
    assert rnd.predicted is not None and rnd.predicted.step_ms == pytest.approx(
        4 * recorded_probe(BASE, 1)
    )
    assert rnd.predicted.steps_ratio == pytest.approx(steps_ratio(128, 32, 5000.0))


def test_early_stopping_is_judged_on_the_whole_run_with_the_time_saved(tmp_path: Path) -> None:
    """The budget's runs (60 steps) end before the plateau shows; the run to its own end (1,500 steps) has a long
    flat tail: judged there, stopping saves most of the run (a trade-off: no target given)."""
    spec = replace(BASE, measure_steps=1500)
    short = Budget(steps=60)
    runner = fake_runner(tmp_path, 5000.0, plateau_at=1.0)
    truncated = to_quality(spec, [cands.early_stopping()], runner, short, seeds=3)
    assert not truncated.rounds[0].kept  # on 60 steps the metric is still falling
    whole = to_quality(
        spec,
        [cands.early_stopping()],
        runner,
        short,
        seeds=3,
        run_whole=runner,
        whole_budget=Budget(steps=1500),
    )
    rnd = whole.rounds[0]
    es = rnd.early_stopping
    assert es is not None and rnd.outcome == "trade-off" and len(whole.whole_runs) == 3
    assert all(len(r.curve) == 1500 for r in whole.whole_runs)
    assert es.saved_share > 0.5 and es.noise is not None
    assert rnd.reason.startswith(
        "judged on the baseline run to its own end (1500 steps), 3 seed(s)"
    )
    out = quality_json(whole)
    assert (
        out["whole_run_budget"] == "its own end (1500 steps)"
        and out["rounds"][0]["early_stopping"]["saved_s"] > 0
    )


def test_a_budget_in_seconds_is_stated_in_the_result(tmp_path: Path) -> None:
    from cli.optimize_quality import DEFAULT_BUDGET

    assert Budget.parse(DEFAULT_BUDGET).seconds is not None  # seconds by default
    spec = replace(BASE, measure_steps=400)

    inner = fake_runner(tmp_path, 5000.0)

    def timed(s: QualitySpec, stop_at: Target | None) -> QualityRun:
        out = inner(
            replace(s, measure_steps=400), stop_at
        )  # the clock stops it: 3 s of the recorded clock
        return QualityRun(
            out.status,
            out.curve.cut(3.0),
            out.run_dir,
            stopped=out.stopped,
            median_step_ms=out.median_step_ms,
        )

    ladder = to_quality(
        spec, [resolved(0, k=2)], timed, Budget(seconds=3.0), seeds=3, apply=patch_workload
    )
    out = quality_json(ladder)
    assert out["budget"] == {"steps": None, "seconds": 3.0, "stated": "3 s"}
    assert "budget 3 s per arm" in quality_table(out)


def test_a_runs_own_noise_scale_reads_its_batch_from_its_spec(tmp_path: Path) -> None:
    from advisors.quality.noise_scale import for_run

    (tmp_path / "spec.json").write_text(json.dumps({"batch_size": 64}))
    assert for_run(tmp_path) is None  # no meter, no number
    (tmp_path / "noise_scale.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows_for(640.0, 64))
    )
    ns = for_run(tmp_path)
    assert ns is not None and ns.b_simple == pytest.approx(640.0) and ns.batch == 64


def test_an_unbounded_interval_is_null_in_json_and_infinity_in_words() -> None:
    from advisors.experiments.results.quality_words import noise_line

    # windows whose |G|² is +1 and −0.9 (per two_batch at window 4, |g_small|² = 10): the mean is positive, but
    # resamples drawing mostly the second kind have |G|² ≤ 0: B_simple unbounded above
    rows = [
        {"window": 4, "gap": 4, "sq_small": 10.0, "sq_big": b, "hook_s": 0.0, "wall_s": 0.1}
        for b in (3.25, 3.25, 3.25, 1.825, 1.825, 1.825)
    ]
    ns = estimate(rows, 32)
    assert ns is not None and ns.b_simple is not None and ns.interval is not None
    assert ns.interval[1] == float("inf")
    out = ns.to_json()
    json.dumps(out, allow_nan=False)  # strict JSON
    assert out["interval"][1] is None and "∞" in noise_line({**out, "reason": "r", "plan": None})
