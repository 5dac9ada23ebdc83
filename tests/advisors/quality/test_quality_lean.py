"""The A/B trials' lean rule, the same for the seeds of a time to quality (issue 43's llm.c fused AdamW: "rejected:
1.13× sooner [0.89, 1.80]" where its A/B read inconclusive): a point estimate past twice the bar's margin with an
interval that does not clear the bar is ``inconclusive``; a small point estimate is still rejected, a clear one
kept. And a convergence candidate that is the same change as a ``--fix`` is judged once, in the fix's round."""

from __future__ import annotations

from advisors.experiments.to_quality.interleave import Pairs, judged_fairly
from advisors.experiments.to_quality.runs import QualityRun
from advisors.quality.arms import ArmTime, compare
from advisors.quality.candidates import Candidate
from advisors.quality.curve import Curve
from advisors.quality.script_candidates import same_as_fix


def _run(seed: int) -> QualityRun:
    return QualityRun(
        "ok", Curve((0.1, 0.2 + seed), (1.0, 0.5), (1, 2), 0.2 + seed), others_cores=0.05, cores=2
    )


def _pairs(n: int) -> Pairs:
    return Pairs(
        tuple(_run(i) for i in range(n)), tuple(_run(i + 10) for i in range(n)), None, None
    )


def test_seeds_that_lean_to_a_gain_they_cannot_show_are_inconclusive() -> None:
    ttt = compare(
        ArmTime((9.9, 8.4, 11.6)), ArmTime((8.8, 10.1, 6.9))
    )  # llm.c's spread: 1.1×, interval wide
    assert ttt.ratio is not None and ttt.ratio > 1.06 and not ttt.kept and ttt.interval[0] < 1.03
    judged, why = judged_fairly(ttt, _pairs(3), one_run=False)
    assert why is not None and "lean towards a gain they cannot show" in why
    assert judged.reason.startswith("inconclusive:") and not judged.kept


def test_a_small_point_estimate_is_still_rejected_and_a_clear_gain_kept() -> None:
    small = compare(ArmTime((10.0, 10.3, 9.8)), ArmTime((9.9, 10.2, 9.9)))  # 1.01×
    assert judged_fairly(small, _pairs(3), one_run=False)[1] is None
    clear = compare(ArmTime((10.0, 10.3, 9.8)), ArmTime((5.0, 5.1, 4.9)))
    got, why = judged_fairly(clear, _pairs(3), one_run=False)
    assert why is None and got.kept


def test_a_candidate_that_is_a_forced_fix_runs_once() -> None:
    fused = Candidate("optimizer_fused", "fused AdamW", "rule", {"optimizer_impl": "fused"})
    assert same_as_fix(fused, ()) is fused
    once = same_as_fix(fused, ("fused_optimizer",))
    assert once.patch is None and "--fix fused_optimizer" in (once.advice or "")
    other = Candidate("optimizer_swap", "SGD → AdamW", "rule", {"optimizer_swap": "adamw"})
    assert same_as_fix(other, ("fused_optimizer",)) is other
