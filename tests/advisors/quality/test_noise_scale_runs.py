"""The noise scale on real runs of a script (the meter injected at boot): far below its critical batch a
batch-scaling candidate is chosen from the prediction and kept by the time-to-target experiment; far above it
none is chosen, with the reason. Slow: each arm is a real launch of tests/scripts/regression_val_train.py, judged on the validation loss it prints."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from advisors.experiments.to_quality import QualitySpec, store_curve_runner, to_quality
from advisors.experiments.to_quality_goodput import planner, store_probe
from advisors.experiments.to_quality_report import quality_json
from advisors.quality import candidates as cands
from advisors.quality.script_candidates import templates
from advisors.quality.target import Budget
from cli.optimize_quality import script_applied, script_resolve
from profilers.run.script_spec import ScriptSpec
from profilers.store.runs import RunStore

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "regression_val_train.py"
METRIC = r"val_loss=([0-9.]+)"
pytestmark = [pytest.mark.slow, pytest.mark.timed]


def inject(s: QualitySpec, cand: cands.Candidate) -> QualitySpec:
    assert isinstance(s, ScriptSpec) and cand.patch is not None
    return s.patch(inject=dict(cand.patch))


def test_far_below_the_critical_batch_a_batch_candidate_is_chosen_and_kept(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    spec = ScriptSpec(command=(sys.executable, str(SCRIPT)), cwd=str(SCRIPT.parent))
    budget = Budget(
        steps=3000
    )  # the target (80 % of it) on the falling part of the curve, whatever the clock
    ladder = to_quality(
        spec,
        templates()[:1],
        store_curve_runner(store, budget, METRIC),
        budget,
        3,
        metric=METRIC,
        apply=inject,
        resolve=script_resolve,
        applied=script_applied,
        planner=planner(store_probe(store)),
    )
    plan = ladder.plan
    assert plan is not None and plan.noise is not None and plan.plan is not None
    assert plan.noise.b_simple is not None and plan.noise.b_simple > 8 * 4  # batch 4, far below
    assert plan.plan.chosen and "below the critical batch" in plan.plan.reason
    batch_rounds = [r for r in ladder.rounds if r.candidate.id.startswith("batch_x")]
    assert [int(r.candidate.id.split("_")[1][1:]) for r in batch_rounds] == list(plan.plan.chosen)
    assert any(r.kept for r in batch_rounds), [r.reason for r in batch_rounds]
    assert all(r.predicted is not None and r.applied for r in batch_rounds)
    out = quality_json(ladder)
    assert out["noise_scale"]["steps"] > 0 and 0 <= out["noise_scale"]["overhead"] < 1


def test_far_above_the_critical_batch_no_batch_candidate_with_the_reason(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    spec = ScriptSpec(
        command=(
            sys.executable,
            str(SCRIPT),
            "--batch-size",
            "512",
            "--noise",
            "0",
            "--steps",
            "400",
        ),
        cwd=str(SCRIPT.parent),
    )
    budget = Budget(seconds=4.0)
    ladder = to_quality(
        spec,
        templates()[:1],
        store_curve_runner(store, budget),
        budget,
        1,
        apply=inject,
        resolve=script_resolve,
        applied=script_applied,
        planner=planner(store_probe(store)),
    )
    plan = ladder.plan
    assert plan is not None and plan.plan is not None and plan.noise is not None
    assert (
        plan.noise.b_simple is not None and plan.noise.b_simple < 512
    )  # noise-free: B_simple = d + 1 = 33
    assert plan.plan.chosen == () and "above the critical batch" in plan.plan.reason
    assert plan.step_ms == {}  # nothing probed
    assert not any(r.candidate.id.startswith("batch_x") for r in ladder.rounds)
