"""One record per experiment (issue 41, item 3): its outcome word, samples/s, speed-up and bound are decided once
(:mod:`advisors.experiments.results.recording`) and every surface reads them back from the stored view."""

from __future__ import annotations

import pytest

from advisors.experiments.results.outcome import render
from advisors.experiments.results.words import from_text, outcome
from advisors.experiments.results.record import (
    ExperimentRecord,
    LadderRecord,
    complete,
    why_stopped,
)
from advisors.experiments.results.stored_view import apply_view, ladder_view, read_view


def rec(
    round_: int,
    title: str,
    kept: bool,
    reason: str,
    speedup: float | None = None,
    not_applied: str | None = None,
    acts_on: str = "compute",
) -> ExperimentRecord:
    said = from_text(kept, reason, not_applied, speedup)
    return ExperimentRecord(
        kind="ladder round",
        round=round_,
        fix_id=title.replace(" ", "_"),
        fix_title=title,
        bottleneck="compute",
        acts_on=acts_on,
        outcome=said.word.value,  # type: ignore[arg-type]
        outcome_text=render(said),
        reason=reason,
        speedup=speedup,
        not_applied=not_applied,
        outcome_why=said.why.value,
    )


def test_each_outcome_has_its_word() -> None:
    assert outcome(True, "kept: 1.40x …") == "kept"
    assert (
        outcome(False, "the fix did not act", not_applied="the loader was never built")
        == "not applied: the loader was never built"
    )
    assert (
        outcome(False, "the patched run ended failed: CUDA error") == "failed: CUDA error"
    )  # said once
    assert outcome(False, "the patched run ended failed") == "failed: the run failed"
    assert outcome(False, "the patched run ended killed: stopped") == "failed: killed: stopped"
    assert (
        outcome(
            False,
            "no real gain: 1.01x, 95% interval [0.98, 1.04] does not clear 1.03x",
            speedup=1.01,
        )
        == "rejected: no real gain: 1.01×, 95% interval [0.98, 1.04] does not clear 1.03×"
    )
    # slower only when the whole interval is below 1 (the walk read "slower, 0.42x, [0.19, 2.07]")
    assert (
        outcome(
            False, "no real gain: 0.52x, 95% interval [0.50, 0.55] does not clear 1.03x", None, 0.52
        )
        == "rejected: slower, 0.52×, 95% interval [0.50, 0.55]"
    )
    assert (
        outcome(
            False, "no real gain: 0.42x, 95% interval [0.19, 2.07] does not clear 1.03x", None, 0.42
        )
        == "rejected: no real gain: 0.42×, 95% interval [0.19, 2.07] does not clear 1.03×"
    )


def test_an_inconclusive_apply_is_inconclusive_on_every_surface() -> None:
    """The walk: the card said "inconclusive …", the Runs list and the reports "rejected 0.98×". Both now read the
    record's word; its label is what the Runs list shows."""
    reason = (
        "inconclusive: other programs took 1.54 of 2 cores in the baseline's trial 3; 0.98x, 95% interval "
        "[0.52, 2.17]"
    )
    said = from_text(False, reason, None, 0.98)
    text = render(said)
    x = ExperimentRecord(
        kind="apply",
        fix_id="dataloader_workers",
        fix_title="DataLoader worker processes",
        bottleneck="data",
        outcome=said.word.value,  # type: ignore[arg-type]
        outcome_text=text,
        reason=reason,
        speedup=0.98,
        low=0.52,
        high=2.17,
        before_samples_per_s=179.4,
        after_samples_per_s=175.2,
        inconclusive="other programs took 1.54 of 2 cores",
    )
    back = read_view(apply_view(x, {"step_samples": {}}))
    assert back is not None and back.record == x
    assert back.label == "inconclusive 0.98×" and back.record.outcome_text.startswith(
        "inconclusive: other programs"
    )


def test_a_view_stored_before_the_record_reads_the_same_word() -> None:
    old = {
        "schema": 1,
        "mode": "apply",
        "fix": "DataLoader worker processes",
        "fix_id": "dataloader_workers",
        "kept": False,
        "reason": "inconclusive: pairs disagree: 2 of 3 saw the patched run faster; 1.20x",
        "summary": {
            "speedup": 1.2,
            "verdict": "rejected",
            "not_applied": None,
            "low": 0.9,
            "high": 1.6,
        },
        "upper_bound": 8.96,
        "step_samples": {"a": [1.0]},
    }
    seen = read_view(old)
    assert seen is not None and seen.record is not None
    assert (
        seen.label == "inconclusive 1.20×"
        and seen.record.bound is not None
        and seen.record.bound.speedup == 8.96
    )
    assert seen.evidence == {"step_samples": {"a": [1.0]}, "breakdowns": {}, "loss_curves": {}}
    assert read_view({"schema": 2, "mode": "apply"}) is None and read_view(None) is None


ROUNDS = (
    rec(1, "More loader workers", True, "kept", 1.8, acts_on="data"),
    rec(2, "bf16 autocast", False, "no real gain: 0.90x", 0.9),
    rec(
        2,
        "torch.compile",
        False,
        "compile is not available",
        not_applied="compile is not available",
    ),
)


def test_a_ladder_says_why_it_stopped() -> None:
    assert why_stopped(ROUNDS[:1], 1, "data") == "All 1 round ran, each with a kept fix."
    said = why_stopped(ROUNDS, 3, "compute")
    assert said.startswith(
        "Stopped in round 2 of 3: it tried 2 fixes for the compute bottleneck and kept none"
    )
    assert "not applied: compile is not available" in said
    assert (
        why_stopped(ROUNDS[:1], 3, "compute")
        == "Stopped in round 2 of 3: it found no fix left for the compute "
        "bottleneck that fits this run."
    )
    failed = (rec(1, "bf16", False, "the patched run ended out_of_memory: CUDA OOM"),)
    assert (
        why_stopped(failed, 3, "memory") == "Stopped in round 1 of 3: round 1's fix (bf16) failed: "
        "out of memory: CUDA OOM."
    )
    assert (
        why_stopped(failed, 1, "memory")
        == "All 1 round ran; round 1's fix (bf16) failed: out of memory: CUDA OOM."
    )
    assert complete(ROUNDS[:1], 1) and not complete(ROUNDS, 2) and not complete(ROUNDS, None)
    assert "`" not in why_stopped(ROUNDS, 2, "data")  # plain text: the page escapes it


def test_a_ladder_names_fixes_by_what_they_act_on() -> None:
    """Issue 42: "tried 3 fixes for the compute bottleneck" when one of them was DataLoader workers."""
    tried = (
        rec(1, "bf16 autocast", False, "no real gain: 0.90x", 0.9),
        rec(1, "More loader workers", False, "no real gain: 1.00x", 1.0, acts_on="data"),
    )
    assert "tried 2 fixes (1 on compute, 1 on data) for the compute bottleneck" in why_stopped(
        tried, 1, "compute"
    )


def test_a_ladder_record_round_trips_and_charts_its_kept_fixes() -> None:
    kept = ExperimentRecord(**{**ROUNDS[0].__dict__, "cumulative_speedup": 1.8})
    lad = LadderRecord(
        rounds=(kept, *ROUNDS[1:]),
        total_speedup=1.8,
        rounds_asked=2,
        why_stopped=why_stopped(ROUNDS, 2, "compute"),
        complete=False,
        last_bottleneck="compute",
    )
    back = read_view(ladder_view(lad))
    assert back is not None and back.ladder == lad and back.label == "ladder 1.80×"
    assert lad.steps == [
        {"label": "start", "speedup": 1.0},
        {"label": "+ More loader workers", "speedup": 1.8},
    ]


def test_identical_loss_curves_are_said_to_be_identical() -> None:
    """Issue 42: two identical loss curves drew as one line."""
    from advisors.experiments.results.evidence import same_curves
    from reports.charts.compare import loss_curves

    assert same_curves({"before": [2.0, 1.5], "after": [2.0, 1.5]})
    assert not same_curves({"before": [2.0, 1.5], "after": [2.0, 1.4]}) and not same_curves(
        {"before": [2.0]}
    )
    fig = loss_curves(
        {"before": [2.0, 1.5], "after": [2.0, 1.5]}, "Loss curves overlaid", identical=True
    )
    assert "identical in both arms" in fig.layout.title.text and fig.data[1].line.dash == "dash"


def test_a_script_whose_batches_were_not_seen_counts_steps_not_samples() -> None:
    """Issue 42: llm.c's throughput columns (0.8 → 1.0) were steps per second labelled samples/s."""
    from dataclasses import replace

    from advisors.experiments.experiment import Policy, run_experiment
    from advisors.experiments.results.recording import experiment_record
    from advisors.fixes import FIXES
    from tests.advisors.fake_script import apply
    from tests.advisors.experiments.test_experiment import BASE, FakeRunner

    fake = FakeRunner()
    e = run_experiment(
        BASE,
        FIXES["cache_decoded"],
        lambda s, p=None: replace(fake(s, p), per_step=True),
        Policy(trials=3, n_boot=200),
        apply=apply,
    )
    x = experiment_record(e)
    assert x.rate_unit == "steps/s" and {t.rate_unit for t in x.trials} == {"steps/s"}
    assert (
        experiment_record(
            run_experiment(
                BASE,
                FIXES["cache_decoded"],
                FakeRunner(),
                Policy(trials=3, n_boot=200),
                apply=apply,
            )
        ).rate_unit
        == "samples/s"
    )


def test_a_round_whose_baseline_moved_says_so() -> None:
    """Issue 42: round 2's "before" was 103.1 samples/s against round 1's "after" of 51.5 for the same code (each
    round's own baseline, at load 4.5). The record says when a baseline moved beyond BASELINE_MOVED, once."""
    from dataclasses import replace

    from advisors.experiments.results.record import BASELINE_MOVED, baseline_moves
    from reports.content import ladder_context

    r1 = replace(
        ROUNDS[0], before_samples_per_s=40.0, after_samples_per_s=51.5, cumulative_speedup=1.29
    )
    r2 = replace(ROUNDS[1], before_samples_per_s=103.1, after_samples_per_s=92.8)
    r2b = replace(
        ROUNDS[2], before_samples_per_s=100.0
    )  # its round's previous attempt ran 103.1: within reach
    moved = baseline_moves((r1, r2, r2b))
    assert (
        moved[0].baseline_moved is None and moved[0].baseline_drift is None
    )  # nothing measured that code before
    assert moved[1].baseline_drift == pytest.approx(103.1 / 51.5, rel=1e-3)
    said = moved[1].baseline_moved or ""
    assert said.startswith(
        "baseline moved: round 2's baseline ran 103.1 samples/s where round 1's patched runs "
        "(More loader workers, kept) ran the same code at 51.5 samples/s (2.00×"
    )
    assert f"beyond the {BASELINE_MOVED:.0%}" in said
    assert moved[2].baseline_moved is None and moved[2].baseline_drift == pytest.approx(
        100.0 / 103.1, rel=1e-3
    )
    # a 20% move is within the threshold; a 30% one is not, either way
    assert (
        baseline_moves((r1, replace(r2, before_samples_per_s=51.5 * 1.2)))[1].baseline_moved is None
    )
    assert baseline_moves((r1, replace(r2, before_samples_per_s=51.5 / 1.3)))[1].baseline_moved
    lad = LadderRecord(
        rounds=moved, total_speedup=1.29, rounds_asked=2, why_stopped="", complete=False
    )
    back = read_view(ladder_view(lad))
    assert (
        back is not None
        and back.ladder is not None
        and back.ladder.rounds[1].baseline_moved == said
    )
    assert [r["baseline_moved"] for r in ladder_context(lad)["rungs"]] == [None, said, None]
