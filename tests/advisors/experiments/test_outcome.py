"""An experiment's verdict is data: one Outcome (word, reason code, texts) made where the fix is
judged, its text rendered by one function; only an old record's text is read back
(``words.from_text``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from advisors.experiments.experiment import Policy, run_experiment
from advisors.experiments.results.ladder_report import experiment_json
from advisors.experiments.results.outcome import WORD_OF, Outcome, Why, Word, judged, render
from advisors.experiments.results.record import ExperimentRecord
from advisors.experiments.results.recording import experiment_record
from advisors.experiments.results.stored_view import apply_view, read_view
from advisors.experiments.results.words import from_text, outcome
from advisors.experiments.trial_load import TrialLoad
from advisors.experiments.trials import RunOutcome
from advisors.fixes import FIXES
from advisors.stats import Trial
from cli.optimize import EXIT_INCONCLUSIVE, exit_code
from profilers.run.script_spec import ScriptSpec
from tests.advisors.fake_script import BASE, apply, knob

LOSS = "; loss (mean of 5 steps to 19) +0.0010"
GAIN = {"interval": "1.42x, 95% interval [1.31, 1.55]", "loss": LOSS}
FLAT = {"interval": "1.02x, 95% interval [0.97, 1.08]", "loss": LOSS}
SLOW = {"interval": "0.52x, 95% interval [0.41, 0.63]", "loss": LOSS}
BROKE = "; loss (mean of 5 steps to 19) +0.2500"
RESCUE = {
    "baseline_status": "out_of_memory",
    "budget": " within the 1000 MB budget (peak 812 MB)",
    "cost": "; +12% time per sample vs the unbudgeted reference",
    "loss": LOSS,
}
TURNS = (
    "turns out_of_memory into ok within the 1000 MB budget (peak 812 MB); +12% time per "
    "sample vs the unbudgeted reference" + LOSS
)
BUSY = (
    "other programs took 1.54 of 2 cores in the baseline's trial 3; 1 of 3 pairs ran "
    "uncontended where a verdict needs 3, and the competition could explain the result"
)
DISAGREE = "pairs disagree: 2 of 3 saw the patched run faster (1.10x, 0.98x, 1.12x)"
LEAN = (
    "the trials lean towards a gain they cannot show: 1.07x clears 1.03x but the interval's "
    "low end does not after 5 pairs (more --trials would tell)"
)
LEANS = {"interval": "1.07x, 95% interval [1.01, 1.12]", "loss": LOSS}
TRACE = "RecursionError: maximum recursion depth exceeded"
NO_LOADER = "the script built no DataLoader"

# (Outcome, the reason it stores, the outcome text it renders): the strings the verdicts made
# before they were data
CASES: list[tuple[Outcome, str, str]] = [
    (
        judged(Why.GAIN, 1.42, 1.31, 1.55, 1.03, **GAIN),
        "kept: 1.42x, 95% interval [1.31, 1.55] per-sample throughput" + LOSS,
        "kept",
    ),
    (
        judged(Why.MEMORY_HEADROOM, 0.97, 0.93, 1.01, 1.03, headroom="peak 900 -> 600 MB", **FLAT),
        "kept for memory headroom: peak 900 -> 600 MB at 1.02x, 95% interval [0.97, 1.08] "
        "per-sample throughput" + LOSS,
        "kept",
    ),
    (judged(Why.TURNS_OK, 0.89, 0.85, 0.93, **RESCUE), TURNS, "kept"),
    (judged(Why.OVER_BUDGET, 0.89, 0.85, 0.93, **RESCUE), TURNS, "rejected: " + TURNS),
    (
        judged(Why.RUNS_LOSS_BREAKS, delta=0.25, tolerance=0.05, loss=BROKE),
        "runs, but the loss does not hold (+0.2500 > 5%)" + BROKE,
        "rejected: runs, but the loss does not hold (+0.2500 > 5%)" + BROKE,
    ),
    (
        judged(Why.NO_GAIN, 1.02, 0.97, 1.08, 1.03, **FLAT),
        "no real gain: 1.02x, 95% interval [0.97, 1.08] does not clear 1.03x" + LOSS,
        "rejected: no real gain: 1.02×, 95% interval [0.97, 1.08] does not clear 1.03×" + LOSS,
    ),
    (
        judged(Why.SLOWER, 0.52, 0.41, 0.63, 1.03, **SLOW),
        "no real gain: 0.52x, 95% interval [0.41, 0.63] does not clear 1.03x" + LOSS,
        "rejected: slower, 0.52×, 95% interval [0.41, 0.63]" + LOSS,
    ),
    (
        judged(Why.LOSS_BREAKS, 1.42, 1.31, 1.55, 1.03, tolerance=0.05, **GAIN),
        "faster (1.42x, 95% interval [1.31, 1.55]) but the loss does not hold (tolerance 5%)"
        + LOSS,
        "rejected: faster (1.42×, 95% interval [1.31, 1.55]) but the loss does not hold "
        "(tolerance 5%)" + LOSS,
    ),
    (
        judged(Why.CONTENDED, 1.02, 0.97, 1.08, 1.03, said=BUSY, **FLAT),
        f"inconclusive: {BUSY}; 1.02x, 95% interval [0.97, 1.08]" + LOSS,
        f"inconclusive: {BUSY}; 1.02×, 95% interval [0.97, 1.08]" + LOSS,
    ),
    (
        judged(Why.PAIRS_DISAGREE, 1.02, 0.97, 1.08, 1.03, said=DISAGREE, **FLAT),
        f"inconclusive: {DISAGREE}; 1.02x, 95% interval [0.97, 1.08]" + LOSS,
        "inconclusive: pairs disagree: 2 of 3 saw the patched run faster (1.10×, 0.98×, 1.12×); "
        "1.02×, 95% interval [0.97, 1.08]" + LOSS,
    ),
    (
        judged(Why.LEAN, 1.07, 1.01, 1.12, 1.03, said=LEAN, **LEANS),
        f"inconclusive: {LEAN}; 1.07x, 95% interval [1.01, 1.12]" + LOSS,
        "inconclusive: the trials lean towards a gain they cannot show: 1.07× clears 1.03× but the "
        "interval's low end does not after 5 pairs (more --trials would tell); 1.07×, 95% interval "
        "[1.01, 1.12]" + LOSS,
    ),
    (
        judged(Why.RUN_ENDED, status="failed", error=TRACE),
        f"the patched run ended failed: {TRACE}",
        f"failed: {TRACE}",
    ),
    (
        judged(Why.RUN_ENDED, status="failed", error=""),
        "the patched run ended failed",
        "failed: the run failed",
    ),
    (
        judged(Why.RUN_ENDED, status="out_of_memory", error="CUDA out of memory"),
        "the patched run ended out_of_memory: CUDA out of memory",
        "failed: out of memory: CUDA out of memory",
    ),
    (
        judged(Why.RUN_ENDED, status="killed", error=""),
        "the patched run ended killed",
        "failed: killed",
    ),
    (
        judged(Why.NOT_ACTED, said=NO_LOADER),
        f"not applied: {NO_LOADER}",
        f"not applied: {NO_LOADER}",
    ),
]


@pytest.mark.parametrize(
    "made, reason, text", CASES, ids=[f"{c[0].why}-{i}" for i, c in enumerate(CASES)]
)
def test_each_code_makes_todays_sentence_and_outcome_text(
    made: Outcome, reason: str, text: str
) -> None:
    assert made.reason == reason and render(made) == text
    assert made.word is WORD_OF[made.why] and str(made.word) == text.split(":")[0]
    # an old record holding only this reason reads back the same word, code and text
    not_applied = made.params["said"] if made.why is Why.NOT_ACTED else None
    back = from_text(made.kept, reason, not_applied, made.ratio)
    assert (back.word, back.why, render(back)) == (made.word, made.why, text)
    assert outcome(made.kept, reason, not_applied, made.ratio) == text


def test_every_code_has_a_word_and_a_case() -> None:
    assert set(WORD_OF) == set(Why)
    # unstated: only an old record's text; the to-quality codes: test_quality_outcomes.py
    quality = {
        Why.NEITHER_REACHED,
        Why.CHANGE_MISSED,
        Why.BASELINE_MISSED,
        Why.AT_TARGET_AT_START,
        Why.ONE_RUN_GAIN,
        Why.ONE_RUN_NO_GAIN,
        Why.STOPS_AT_TARGET,
        Why.NEVER_REACHES,
        Why.REACHES_AT_END,
        Why.STILL_IMPROVING,
        Why.TRADE_OFF,
        Why.NO_RUN,
        Why.ADVICE_ONLY,
    }
    checked = {Why.CHECKED}  # never in an old record: test_a_check_runs_the_patched_command_once
    assert {c[0].why for c in CASES} == set(Why) - {Why.UNSTATED} - quality - checked
    assert {str(w) for w in Word} >= {
        "kept",
        "rejected",
        "inconclusive",
        "not applied",
        "failed",
        "cancelled",
    }


def test_an_old_reason_that_states_nothing_known_is_rejected_as_stored() -> None:
    old = from_text(False, "  something an older Stepwise wrote 1.5x  ", None, 1.5)
    assert (old.word, old.why, render(old)) == (
        Word.REJECTED,
        Why.UNSTATED,
        "rejected: something an older Stepwise wrote 1.5×",
    )
    assert render(from_text(False, None)) == "rejected: no reason stored"


@dataclass
class Arms:
    """A runner: each arm's step time (ms) per trial, in run order, and how the patched run
    ends."""

    base_ms: list[float]
    patched_ms: list[float]
    patched_status: str = "ok"
    others: float = 0.0
    calls: int = 0

    def __call__(self, spec: ScriptSpec, on_progress: Any = None) -> RunOutcome:
        self.calls += 1
        patched = bool(knob(spec, "cache_decoded"))
        if patched and self.patched_status != "ok":
            return RunOutcome(
                self.patched_status, None, None, (), 0, "  Boom: it broke  \nTraceback …", None
            )
        ms = (self.patched_ms if patched else self.base_ms).pop(0)
        noise = np.random.default_rng(self.calls).standard_normal(20)
        walls = tuple(float(w) for w in ms * (1 + 0.01 * noise))
        load = TrialLoad(others_cores=self.others, cores=2, samples=40)
        return RunOutcome(
            "ok",
            Trial(walls, 32.0),
            500.0,
            tuple(np.linspace(2.3, 1.0, 20)),
            20,
            None,
            f"run-{self.calls}",
            load=load,
        )


RUNS = {
    Why.GAIN: Arms([100.0] * 3, [70.0] * 3),
    Why.NO_GAIN: Arms([100.0, 101.0, 99.0], [100.5, 99.5, 100.0]),
    Why.SLOWER: Arms([100.0] * 3, [190.0, 195.0, 200.0]),
    Why.PAIRS_DISAGREE: Arms([100.0] * 5, [80.0, 103.0, 80.0, 103.0, 80.0]),
    Why.RUN_ENDED: Arms([100.0], [], patched_status="failed"),
}


@pytest.mark.parametrize("why", list(RUNS))
def test_an_experiment_carries_its_outcome_into_the_record_and_the_json(why: Why) -> None:
    policy = Policy(trials=3, max_trials=5, n_boot=500)
    exp = run_experiment(BASE, FIXES["cache_decoded"], RUNS[why], policy, apply=apply)
    assert exp.outcome.why is why, exp.reason
    assert exp.reason == exp.outcome.reason and exp.kept == exp.outcome.kept
    # today's words: what the text reader made of the reason before verdicts were data
    assert render(exp.outcome) == outcome(exp.kept, exp.reason, exp.not_applied, exp.speedup)
    rec = experiment_record(exp)
    text = render(exp.outcome)
    assert (rec.outcome, rec.outcome_why, rec.outcome_text) == (exp.outcome.word, why, text)
    out = experiment_json(exp, rec)
    assert (out["outcome_word"], out["outcome_why"], out["outcome"]) == (rec.outcome, why, text)
    back = read_view(apply_view(rec, {}))
    assert back is not None and back.record == rec


def test_a_record_stored_before_the_codes_reads_the_same_and_gets_its_code() -> None:
    reason = "no real gain: 0.52x, 95% interval [0.41, 0.63] does not clear 1.03x; loss unknown"
    x = ExperimentRecord(
        kind="apply",
        fix_id="f",
        fix_title="F",
        bottleneck="data",
        outcome="rejected",
        reason=reason,
        speedup=0.52,
        low=0.41,
        high=0.63,
        outcome_text="rejected: slower, 0.52×, 95% interval [0.41, 0.63]; loss unknown",
    )
    view = apply_view(x, {})
    del view["record"]["outcome_why"]  # as an older Stepwise stored it
    back = read_view(view)
    assert back is not None and back.record is not None
    assert back.record.outcome_why == "slower"
    seen = (back.record.outcome, back.record.outcome_text, back.label)
    assert seen == (x.outcome, x.outcome_text, "rejected 0.52×")


def test_a_schema_one_view_reads_its_word_text_and_code() -> None:
    old = {
        "schema": 1,
        "mode": "apply",
        "fix": "DataLoader worker processes",
        "fix_id": "dataloader_workers",
        "kept": False,
        "reason": "the patched run ended out_of_memory: CUDA out of memory",
        "summary": {"speedup": None, "not_applied": None},
    }
    seen = read_view(old)
    assert seen is not None and seen.record is not None
    assert (seen.record.outcome, seen.record.outcome_why, seen.record.outcome_text) == (
        "failed",
        "run_ended",
        "failed: out of memory: CUDA out of memory",
    )


def test_the_exit_code_reads_the_word_not_the_text() -> None:
    ladder = {
        "rounds": [
            {"outcome": "rejected: no real gain: …", "outcome_word": "rejected"},
            {"outcome": "inconclusive: pairs disagree …", "outcome_word": "inconclusive"},
        ]
    }
    assert exit_code(ladder) == EXIT_INCONCLUSIVE
    assert exit_code({"rounds": [{"outcome": "kept", "outcome_word": "kept"}]}) == 0
    quality = {"rounds": [{"outcome": "inconclusive", "outcome_word": "inconclusive"}]}
    assert exit_code(quality) == EXIT_INCONCLUSIVE


def test_a_check_runs_the_patched_command_once_and_asks_no_verdict() -> None:
    arms = Arms([], [70.0])
    exp = run_experiment(BASE, FIXES["cache_decoded"], arms, Policy(check=True), apply=apply)
    assert arms.calls == 1 and len(exp.patched.outcomes) == 1 and not exp.baseline.outcomes
    assert (exp.outcome.word, exp.outcome.why, exp.kept, exp.ratio) == (
        Word.INCONCLUSIVE,
        Why.CHECKED,
        False,
        None,
    )
    assert render(exp.outcome) == (
        "inconclusive: --check ran the patched command once to show the "
        "change acts; no A/B trials, so no verdict"
    )
    rec = experiment_record(exp)
    out = experiment_json(exp, rec)
    assert (out["outcome_word"], out["outcome_why"]) == ("inconclusive", "checked")
    assert exit_code({"rounds": [out]}) == 0  # a check asked for no verdict: none is left open
    failed = run_experiment(
        BASE,
        FIXES["cache_decoded"],
        Arms([], [], patched_status="failed"),
        Policy(check=True),
        apply=apply,
    )
    assert (
        failed.outcome.why is Why.RUN_ENDED and render(failed.outcome) == "failed: Boom: it broke"
    )
