"""A to-quality round's verdict is data too: each judgement (time to target, the seeds' fairness
rules, early stopping) sets its reason code where it is made, and the round's word is that code's
word."""

from __future__ import annotations

from advisors.experiments.results.outcome import WORD_OF, Why, Word
from advisors.experiments.results.quality_record import QualityRecord
from advisors.experiments.to_quality.interleave import Pairs, judged_fairly
from advisors.experiments.to_quality.runs import QualityRun
from advisors.quality.arms import ArmTime, compare
from advisors.quality.curve import Curve
from advisors.quality.early_stop import measure


def _pairs(n: int) -> Pairs:
    def run(seed: int) -> QualityRun:
        curve = Curve((0.1, 0.2 + seed), (1.0, 0.5), (1, 2), 0.2 + seed)
        return QualityRun("ok", curve, others_cores=0.05, cores=2)

    return Pairs(tuple(run(i) for i in range(n)), tuple(run(i + 10) for i in range(n)), None, None)


def test_time_to_target_sets_its_code_where_it_judges() -> None:
    cases = {
        Why.GAIN: compare(ArmTime((10.0, 10.3, 9.8)), ArmTime((5.0, 5.1, 4.9))),
        Why.SLOWER: compare(ArmTime((5.0, 5.1, 4.9)), ArmTime((10.0, 10.3, 9.8))),
        Why.NO_GAIN: compare(ArmTime((10.0, 10.3, 9.8)), ArmTime((9.9, 10.2, 9.9))),
        Why.NEITHER_REACHED: compare(ArmTime((None, None, 1.0)), ArmTime((None, None, 1.0))),
        Why.CHANGE_MISSED: compare(ArmTime((1.0, 1.1, 1.2)), ArmTime((0.5, None, None))),
        Why.BASELINE_MISSED: compare(ArmTime((0.5, None, None)), ArmTime((1.0, 1.1, 1.2))),
        Why.AT_TARGET_AT_START: compare(ArmTime((1.0, 1.1, 1.2)), ArmTime((0.0, 0.0, 0.0))),
    }
    for why, ttt in cases.items():
        assert ttt.why is why, (why, ttt.reason)
        assert ttt.kept == (WORD_OF[why] is Word.KEPT)
        assert ttt.reason.startswith(str(WORD_OF[why])) or WORD_OF[why] is Word.REJECTED


def test_the_lean_rule_and_one_run_set_their_codes() -> None:
    leaning = compare(ArmTime((9.9, 8.4, 11.6)), ArmTime((8.8, 10.1, 6.9)))
    lean, said = judged_fairly(leaning, _pairs(3), False)
    assert said is not None and lean.why is Why.LEAN and lean.reason.startswith("inconclusive: ")
    flat = compare(ArmTime((10.0, 10.3, 9.8)), ArmTime((9.9, 10.2, 9.9)))
    small, said = judged_fairly(flat, _pairs(3), False)
    assert said is None and small.why is Why.NO_GAIN


def test_early_stopping_sets_its_code() -> None:
    falling = Curve(
        tuple(float(i) for i in range(1, 41)),
        tuple(1.0 - 0.02 * i for i in range(40)),
        tuple(range(1, 41)),
        40.0,
    )
    flat = Curve(
        tuple(float(i) for i in range(1, 41)),
        tuple(max(1.0 - 0.1 * i, 0.5) for i in range(40)),
        tuple(range(1, 41)),
        40.0,
    )
    assert measure([], "min").why is Why.NO_RUN
    assert measure([falling], "min").why is Why.STILL_IMPROVING
    plateau = measure([flat], "min")
    assert (plateau.why, plateau.outcome) == (Why.TRADE_OFF, "trade-off")
    assert plateau.reason.startswith("trade-off")
    assert measure([falling], "min", target=-5.0).why is Why.NEVER_REACHES
    reached = measure([flat], "min", target=0.6)
    assert (reached.why, reached.outcome, reached.kept) == (Why.STOPS_AT_TARGET, "kept", True)


def test_a_quality_record_stored_before_the_codes_still_reads() -> None:
    old = {
        "target": "loss ≤ 0.5 (given)",
        "seeds": 3,
        "one_run": False,
        "rounds": [
            {"round": 1, "fix_id": "f", "title": "F", "outcome": "kept", "reason": "kept: …"}
        ],
    }
    rec = QualityRecord.from_json(old)
    assert rec.rounds[0].outcome == "kept" and rec.rounds[0].outcome_why is None
