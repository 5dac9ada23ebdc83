"""A target on the baseline's floor (:func:`advisors.quality.fair.on_floor`): read at 80% of a budget that outlasts
the fall, it is said (in ``--json``'s ``floor``, the terminal's lines and the record the Advisor page and the report
render); a target on the fall, or a curve still falling within its noise, says nothing."""

from __future__ import annotations

import random
from dataclasses import replace

from advisors.experiments.results.quality_record import quality_record
from advisors.experiments.to_quality import QualityRun, QualitySpec, to_quality
from advisors.experiments.to_quality_report import quality_json, quality_table
from advisors.quality import fair
from advisors.quality.candidates import Candidate
from advisors.quality.curve import Curve
from advisors.quality.target import Budget, Target, baseline_value
from profilers.run.script_spec import ScriptSpec
from reports.quality import markdown

BIGGER = Candidate("batch_x2", "batch × 2", "rule", {"batch_scale": 2})


def ema_curve(
    steps: int,
    seed: int,
    halving: float = 70.0,
    floor: float = 4.15,
    step_s: float = 0.001,
    noise: float = 2.8,
) -> Curve:
    """A training loss's EMA (alpha 0.1) as the meter draws it: an exponential fall to ``floor`` (halving every
    ``halving`` steps) with per-batch noise (sd ``noise``, as a batch of 4 under label noise of sd 2 has)."""
    rng, ema, values = random.Random(seed), None, []
    for i in range(steps):
        raw = floor + 30.0 * 0.5 ** (i / halving) + rng.gauss(0.0, noise)
        ema = raw if ema is None else 0.9 * ema + 0.1 * raw
        values.append(ema)
    return Curve(
        tuple(step_s * (i + 1) for i in range(steps)),
        tuple(values),
        tuple(range(1, steps + 1)),
        step_s * steps,
        smoothed=True,
    )


def test_a_target_read_after_the_fall_is_on_the_floor_and_one_on_the_fall_is_not() -> None:
    long = [ema_curve(6000, s) for s in range(3)]
    target = baseline_value(long, Budget(steps=6000))
    said = fair.on_floor(long, target, "min")
    assert said is not None and "sits on the baseline's floor" in said and "3 of 3 seeds" in said
    short = [ema_curve(300, s) for s in range(3)]
    assert fair.on_floor(short, baseline_value(short, Budget(steps=300)), "min") is None
    # a target well above the floor, on a curve that has reached it, is reached on the fall: not on the floor
    assert fair.on_floor(long, 12.0, "min") is None


def test_a_metric_to_raise_is_judged_the_other_way() -> None:
    flipped = [
        Curve(c.times_s, tuple(-v for v in c.values), c.steps, c.end_s, True)
        for c in (ema_curve(6000, s) for s in range(3))
    ]
    assert fair.on_floor(flipped, baseline_value(flipped, Budget(steps=6000)), "max") is not None


def test_the_floor_is_said_in_the_json_the_terminal_and_the_record() -> None:
    def run(spec: QualitySpec, stop_at: Target | None) -> QualityRun:
        return QualityRun(
            "ok", ema_curve(6000, spec.seed + (10 if spec.inject else 0)), others_cores=0.0, cores=2
        )

    spec = ScriptSpec(command=("python", "train.py"), cwd="/")
    ladder = to_quality(
        spec,
        [BIGGER],
        run,
        Budget(steps=6000),
        seeds=3,
        apply=lambda s, c: replace(s, inject=dict(c.patch or {})),
    )
    out = quality_json(ladder)
    assert out["floor"] and "sits on the baseline's floor" in out["floor"]
    assert out["floor"] in quality_table(out)
    rec = quality_record(out)
    assert rec.floor == out["floor"] and "**A target on the floor:**" in markdown(rec)
    assert type(rec).from_json(rec.to_json()).floor == rec.floor
