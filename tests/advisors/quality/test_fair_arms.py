"""Fair to-quality arms (issue 43): seeds interleaved, contention checked by the A/B rule, seeds that are one run
judged against a stated tolerance, targets clear of the start's noise, no target before a real optimizer step."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisors.experiments.to_quality import QualityRun, QualitySpec, to_quality
from advisors.experiments.to_quality_report import quality_json, quality_table
from advisors.quality import fair
from advisors.quality.candidates import Candidate
from advisors.quality.curve import Curve
from advisors.quality.target import Budget, Target
from profilers.errors import SpecError
from profilers.run.script_spec import ScriptSpec
from reports.quality import markdown
from advisors.experiments.results.outcome import Why
from advisors.experiments.results.quality_record import quality_record

BASE = ScriptSpec(command=("python", "train.py"), cwd="/")
FAST = Candidate("fast", "a faster arm", "rule", {"batch_scale": 2})
ACCUM = Candidate("accum", "accumulation", "rule", {"grad_accum": 4})


def curve(step_s: float, n: int = 60, jitter: float = 0.0, start: float = 2.0) -> Curve:
    """A loss falling from ``start`` by 2 % a step, ``step_s`` seconds a step."""
    vals = tuple(start * 0.98**i + jitter for i in range(n))
    return Curve(
        tuple(step_s * (i + 1) for i in range(n)), vals, tuple(range(1, n + 1)), step_s * n
    )


def runner(
    order: list[tuple[str, int]],
    load: dict[tuple[str, int], list[float]] | None = None,
    same_seeds: bool = False,
):
    """A CurveRunFn: the arm with ``batch_scale`` steps twice as fast; ``load`` gives other programs' cores per
    (arm, seed), one value per attempt."""

    def run(spec: QualitySpec, stop_at: Target | None) -> QualityRun:
        arm = "after" if spec.inject else "before"
        order.append((arm, spec.seed))
        jitter = 0.0 if same_seeds else 0.001 * spec.seed
        c = curve(0.05 if arm == "after" else 0.1, jitter=jitter)
        others = (load or {}).get((arm, spec.seed), [0.0])
        taken = sum(1 for a in order if a == (arm, spec.seed)) - 1
        return QualityRun("ok", c, others_cores=others[min(taken, len(others) - 1)], cores=2)

    return run


def apply(spec: QualitySpec, cand: Candidate) -> QualitySpec:
    return replace(spec, inject=dict(cand.patch or {}))


def test_the_arms_seeds_run_interleaved_baseline_then_change() -> None:
    order: list[tuple[str, int]] = []
    ladder = to_quality(BASE, [FAST], runner(order), Budget(steps=60), seeds=3, apply=apply)
    first_pass = [("before", s) for s in range(3)]
    assert order == first_pass + [
        ("before", 0),
        ("after", 0),
        ("before", 1),
        ("after", 1),
        ("before", 2),
        ("after", 2),
    ]
    rnd = ladder.rounds[0]
    assert rnd.outcome == "kept" and len(rnd.baseline_runs) == 3 and not ladder.one_run


def test_a_contended_change_is_rerun_then_inconclusive_with_the_loads() -> None:
    """The llm.c fused-AdamW case: one arm's seeds ran beside another program on most of the machine (here the
    baseline's), the other's had it to themselves; a verdict could be the neighbour's doing, not the change's."""
    order: list[tuple[str, int]] = []
    # the neighbour sat on the *baseline* (1.6 of 2 cores) in both attempts of every pair: the change's 2×
    load = {("before", s): [1.6, 1.6] for s in range(3)} | {("after", s): [0.0] for s in range(3)}
    ladder = to_quality(BASE, [FAST], runner(order, load), Budget(steps=60), seeds=3, apply=apply)
    rnd = ladder.rounds[0]
    assert order.count(("after", 0)) == 2  # a pair with one contended run ran again, once
    assert rnd.outcome == "inconclusive" and not rnd.kept
    assert rnd.reason.startswith(
        "inconclusive: other programs took 1.60 of 2 cores during the baseline's seeds"
    )
    assert "run again" in rnd.reason and rnd.inconclusive is not None
    assert rnd.outcome_why is Why.CONTENDED
    assert quality_json(ladder)["rounds"][0]["outcome_why"] == "contended"


def test_a_quiet_rerun_clears_the_contention() -> None:
    order: list[tuple[str, int]] = []
    load = {
        ("before", 1): [0.0, 1.6, 0.0]
    }  # first pass quiet, busy in its pair, quiet when run again
    ladder = to_quality(BASE, [FAST], runner(order, load), Budget(steps=60), seeds=3, apply=apply)
    assert order.count(("before", 1)) == 3 and ladder.rounds[0].outcome == "kept"
    assert ladder.rounds[0].outcome_why is Why.GAIN


def test_seeds_that_are_one_run_are_said_so_and_judged_against_a_stated_tolerance() -> None:
    said: list[str] = []
    ladder = to_quality(
        BASE,
        [FAST],
        runner([], same_seeds=True),
        Budget(steps=60),
        seeds=3,
        apply=apply,
        on_progress=said.append,
    )
    assert ladder.one_run and any("they are one run" in s for s in said)
    rnd = ladder.rounds[0]
    assert rnd.time_to_target is not None and rnd.time_to_target.interval is None
    assert (
        "one run" in rnd.reason
        and "stated tolerance of 5%" in rnd.reason
        and "spread" in rnd.reason
    )
    out = quality_json(ladder)
    assert rnd.outcome_why in (Why.ONE_RUN_GAIN, Why.ONE_RUN_NO_GAIN)
    said = out["rounds"][0]
    assert (said["outcome_word"], said["outcome_why"]) == (rnd.outcome, rnd.outcome_why)
    assert quality_record(out).rounds[0].outcome_why == rnd.outcome_why
    assert out["one_run"] and "**The 3 seeds are one run:**" in markdown(quality_record(out))
    assert "baseline seeds are one run" in quality_table(out)


def test_a_target_inside_the_baselines_start_noise_is_refused() -> None:
    with pytest.raises(SpecError, match="inside the baseline's own noise at its start"):
        to_quality(
            BASE, [FAST], runner([]), Budget(steps=60), seeds=3, apply=apply, target_value=1.95
        )


def test_no_arm_reaches_a_target_before_its_first_real_optimizer_step() -> None:
    """Accumulation over 4: steps 1–4 are micro-batches of one update; a target met at step 2 does not count."""
    c = Curve(
        (1.0, 2.0, 3.0, 4.0, 5.0, 6.0), (2.0, 0.5, 0.5, 0.5, 0.5, 0.4), (1, 2, 3, 4, 5, 6), 6.0
    )
    assert fair.first_counted_step(ACCUM.patch) == 5 and fair.first_counted_step(FAST.patch) == 2
    kept = fair.after_first_update(c, 5)
    assert kept.steps == (5, 6) and kept.end_s == 6.0
    assert fair.after_first_update(c, 5, printed=True).steps == (4, 5, 6)
    flat = replace(c, steps=(0,) * 6)  # no step counts: nothing can be cut
    assert fair.after_first_update(flat, 5) == flat


def test_start_band_and_one_run_helpers() -> None:
    assert fair.start_noise([curve(0.1), curve(0.1, jitter=0.01)]) == pytest.approx(
        (2 * 0.98**4, 2.01)
    )
    assert fair.clear_of_start(1.0, "min", (1.8, 2.0)) is None
    assert fair.clear_of_start(1.9, "min", (1.8, 2.0)) is not None
    assert fair.clear_of_start(0.9, "max", (0.1, 0.3)) is None
    assert fair.one_run([curve(0.1), curve(0.1)]) and not fair.one_run(
        [curve(0.1), curve(0.1, jitter=1e-6)]
    )
    assert not fair.one_run([curve(0.1)])


SLOW = Candidate("slow", "a second arm", "rule", {"grad_accum": 1})


def test_the_baseline_runs_once_per_seed_for_every_candidate() -> None:
    """Two candidates against one baseline: the interleave is baseline, cand 1, cand 2 per seed (9 runs, not 12),
    and each round says which of the interleave's baseline runs it was judged against."""
    order: list[tuple[str, int]] = []
    ladder = to_quality(BASE, [FAST, SLOW], runner(order), Budget(steps=60), seeds=3, apply=apply)
    first_pass = [("before", s) for s in range(3)]
    assert order == first_pass + [
        (arm, s) for s in range(3) for arm in ("before", "after", "after")
    ]
    assert len(ladder.interleaved) == 3
    for rnd in ladder.rounds:
        assert rnd.judged_against == (0, 1, 2)
        assert rnd.baseline_runs == ladder.interleaved
    out = quality_json(ladder)
    assert [r["judged_against"] for r in out["rounds"]] == [[0, 1, 2], [0, 1, 2]]
    assert len(out["interleaved_baseline"]) == 3


def test_a_contended_candidate_is_rerun_against_one_more_shared_baseline_run() -> None:
    """Seed 1's baseline ran beside a neighbour: both candidates' pairs differ in contention, so one more baseline
    run is made for seed 1 and both candidates run again against it (not one baseline rerun per candidate)."""
    order: list[tuple[str, int]] = []
    load = {
        ("before", 1): [0.0, 1.6, 0.0]
    }  # first pass quiet, busy in the interleave, quiet when run again
    ladder = to_quality(
        BASE, [FAST, SLOW], runner(order, load), Budget(steps=60), seeds=3, apply=apply
    )
    assert order.count(("before", 1)) == 3 and order.count(("after", 1)) == 4
    assert len(ladder.interleaved) == 4
    for rnd in ladder.rounds:
        assert rnd.judged_against == (0, 2, 3)  # seed 1's first interleave run (1) was set aside
