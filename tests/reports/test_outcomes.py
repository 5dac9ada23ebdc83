"""One outcome word per experiment and rung, and why a ladder stopped (issue 23, item 2)."""

from __future__ import annotations

from reports.outcomes import complete, outcome, row_outcome, view_outcome, why_stopped


def test_each_outcome_has_its_word() -> None:
    assert outcome(True, "kept: 1.40x …") == "kept"
    assert outcome(False, "the fix did not act", not_applied="the loader was never built") == \
        "not applied: the loader was never built"
    assert outcome(False, "the patched run ended failed: CUDA error") == "failed: failed: CUDA error"
    assert outcome(False, "no real gain: 1.01x, 95% interval [0.98, 1.04] does not clear 1.03x", speedup=1.01) \
        == "rejected: no real gain: 1.01×, 95% interval [0.98, 1.04] does not clear 1.03×"


def test_a_fix_that_slowed_the_run_is_rejected_as_slower_not_no_gain() -> None:
    view = {"kept": False, "reason": "no real gain: 0.52x, 95% interval [0.50, 0.55] does not clear 1.03x",
            "summary": {"speedup": 0.52, "not_applied": None}}
    word = view_outcome(view)
    assert word == "rejected: slower, 0.52×, 95% interval [0.50, 0.55]" and "no real gain" not in word


def test_slower_only_when_the_whole_interval_is_below_one() -> None:
    """The dashboard walk read "rejected: slower, 0.42x, 95% interval [0.19, 2.07]": an interval spanning 1
    cannot say slower. It stays "no real gain", with the ratio in the × the table beside it uses."""
    view = {"kept": False, "reason": "no real gain: 0.42x, 95% interval [0.19, 2.07] does not clear 1.03x",
            "summary": {"speedup": 0.42, "not_applied": None}}
    assert view_outcome(view) == "rejected: no real gain: 0.42×, 95% interval [0.19, 2.07] does not clear 1.03×"


ROWS = [{"round": 1, "fix": "More loader workers", "kept": True, "verdict": "kept", "speed-up": 1.8, "reason": "kept"},
        {"round": 2, "fix": "bf16 autocast", "kept": False, "verdict": "rejected", "speed-up": 0.9,
         "reason": "no real gain: 0.90x"},
        {"round": 2, "fix": "torch.compile", "kept": False, "verdict": "not applied", "speed-up": None,
         "reason": "compile is not available"}]


def test_a_ladder_says_why_it_stopped() -> None:
    assert why_stopped(ROWS[:1], 1, "compute") == "All 1 round ran, each with a kept fix."
    said = why_stopped(ROWS, 3, "compute")
    assert said.startswith("Stopped in round 2 of 3: it tried 2 fixes for the compute bottleneck and kept none")
    assert "not applied: compile is not available" in said
    assert why_stopped(ROWS[:1], 3, "compute") == "Stopped in round 2 of 3: it found no fix left for the compute " \
        "bottleneck that fits this run."
    failed = [{"round": 1, "fix": "bf16", "kept": False, "verdict": "rejected",
               "reason": "the patched run ended out_of_memory: CUDA OOM"}]
    assert why_stopped(failed, 3, "memory") == "Stopped in round 1 of 3: round 1's fix (bf16) failed: " \
        "out_of_memory: CUDA OOM."
    assert row_outcome(ROWS[2]) == "not applied: compile is not available"


def test_a_ladder_whose_last_round_kept_nothing_ran_all_its_rounds() -> None:
    """The dashboard walk: a 2-round ladder whose round 2 kept nothing said "Stopped after round 1 of 2: round
    2 tried 2 fixes…" above a table with round 2 in it. Every round ran: it says so, and what the last one did."""
    assert why_stopped(ROWS, 2, "data").startswith("All 2 rounds ran; round 2 tried 2 fixes for the data bottleneck "
                                                   "and kept none")
    assert why_stopped(ROWS[:1], 2, "data") == "All 2 rounds ran; round 2 found no fix left for the data bottleneck " \
        "that fits this run."
    failed = [{"round": 1, "fix": "bf16", "kept": False, "verdict": "rejected",
               "reason": "the patched run ended out_of_memory: CUDA OOM"}]
    assert why_stopped(failed, 1, "memory") == "All 1 round ran; round 1's fix (bf16) failed: out_of_memory: CUDA OOM."
    assert complete(ROWS[:1], 1) and not complete(ROWS, 2) and not complete(ROWS, None)
    assert "`" not in why_stopped(ROWS, 2, "data")  # plain text: the page escapes it, so backticks showed as such
