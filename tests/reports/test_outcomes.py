"""One outcome word per experiment and rung, and why a ladder stopped (issue 23, item 2)."""

from __future__ import annotations

from reports.outcomes import outcome, row_outcome, view_outcome, why_stopped


def test_each_outcome_has_its_word() -> None:
    assert outcome(True, "kept: 1.40x …") == "kept"
    assert outcome(False, "the fix did not act", not_applied="the loader was never built") == \
        "not applied: the loader was never built"
    assert outcome(False, "the patched run ended failed: CUDA error") == "failed: failed: CUDA error"
    assert outcome(False, "no real gain: 1.01x, 95% interval [0.98, 1.04] does not clear 1.03x", speedup=1.01) \
        == "rejected: no real gain: 1.01x, 95% interval [0.98, 1.04] does not clear 1.03x"


def test_a_fix_that_slowed_the_run_is_rejected_as_slower_not_no_gain() -> None:
    view = {"kept": False, "reason": "no real gain: 0.52x, 95% interval [0.50, 0.55] does not clear 1.03x",
            "summary": {"speedup": 0.52, "not_applied": None}}
    word = view_outcome(view)
    assert word == "rejected: slower, 0.52x, 95% interval [0.50, 0.55]" and "no real gain" not in word


ROWS = [{"round": 1, "fix": "More loader workers", "kept": True, "verdict": "kept", "speed-up": 1.8, "reason": "kept"},
        {"round": 2, "fix": "bf16 autocast", "kept": False, "verdict": "rejected", "speed-up": 0.9,
         "reason": "no real gain: 0.90x"},
        {"round": 2, "fix": "torch.compile", "kept": False, "verdict": "not applied", "speed-up": None,
         "reason": "compile is not available"}]


def test_a_ladder_says_why_it_stopped() -> None:
    assert why_stopped(ROWS[:1], 1, "compute") == "All 1 round ran, each with a kept fix."
    said = why_stopped(ROWS, 3, "compute")
    assert said.startswith("Stopped after round 1 of 3: round 2 tried 2 fixes for `compute` and kept none")
    assert "not applied: compile is not available" in said
    assert why_stopped(ROWS[:1], 3, "compute") == "Stopped after round 1 of 3: no fix left for `compute` that fits " \
        "this run."
    failed = [{"round": 1, "fix": "bf16", "kept": False, "verdict": "rejected",
               "reason": "the patched run ended out_of_memory: CUDA OOM"}]
    assert why_stopped(failed, 3, "memory") == "Stopped in round 1 of 3: round 1's fix (bf16) failed: " \
        "out_of_memory: CUDA OOM."
    assert row_outcome(ROWS[2]) == "not applied: compile is not available"
