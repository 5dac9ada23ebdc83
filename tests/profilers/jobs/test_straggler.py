"""The one straggler rule (profilers.jobs.straggler): a lead beyond twice the noise, the noise the largest of the
step-to-step spread, the spread among the other ranks and 2.5% of the step; no rank marked where neither spread
can be measured. The sentences are the ones every page shows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from profilers.jobs.straggler import NOISE_FLOOR, find_in_steps, find_straggler, victims


def _steps(
    work_by_rank: dict[int, list[float]], step_ms: float | None = None
) -> dict[int, list[tuple[float, float]]]:
    """Each rank's steps as (step ms, work ms); the step is the work plus a fixed wait unless given."""
    return {
        r: [(step_ms if step_ms is not None else w + 10.0, w) for w in series]
        for r, series in work_by_rank.items()
    }


def test_a_lead_within_step_noise_is_not_a_straggler() -> None:
    rng = np.random.default_rng(0)
    noisy = {r: list(100 + rng.normal(0, 4.0, 20)) for r in range(3)}
    noisy[2] = [v + 3.0 for v in noisy[2]]
    call = find_straggler(_steps(noisy))
    assert not call.marked and call.straggler is None and call.step_noise_ms is not None
    assert call.peer_spread_ms is None  # two other ranks: no spread among them is measured
    assert (
        "within twice the noise" in call.reason
        and "the spread of a rank's work over its 20 steps" in call.reason
    )


def test_a_lead_beyond_step_noise_is_a_straggler() -> None:
    rng = np.random.default_rng(1)
    work = {r: list(100 + rng.normal(0, 0.5, 20)) for r in range(4)}
    work[1] = [v + 10 for v in work[1]]
    call = find_straggler(_steps(work))
    assert call.marked and call.rank == 1 and 9 < call.lead_ms < 11
    s = call.straggler
    assert (
        s is not None
        and s.rank == 1
        and s.excess_share == pytest.approx(call.lead_ms / call.median_step_ms)
    )
    assert call.reason.startswith("Straggler: rank 1 works ")


def test_a_lead_under_the_floor_is_never_a_straggler() -> None:
    """Perfectly steady steps measure no noise at all: the floor, 2.5% of the step, still stands."""
    work = {
        0: [100.0] * 5,
        1: [104.0] * 5,
        2: [100.0] * 5,
    }  # 4 ms of a 110 ms step: 3.6%, under 2 × 2.5%
    call = find_straggler(_steps(work))
    assert call.noise_ms == pytest.approx(NOISE_FLOOR * 110.0) and not call.marked
    assert "2.5% of the step, the least taken for noise" in call.reason
    work[1] = [106.0] * 5  # 5.5%: beyond it
    assert find_straggler(_steps(work)).marked


def test_one_step_is_judged_by_the_spread_among_the_ranks() -> None:
    """With one step per rank the step-to-step noise cannot be measured, but eight ranks show how far ranks differ:
    one far beyond the rest is marked, one that works as long as the next is not."""
    apart = {r: [100.0 + r * 0.1] for r in range(8)}
    apart[5] = [130.0]
    call = find_straggler(_steps(apart))
    assert (
        call.step_noise_ms is None
        and call.peer_spread_ms is not None
        and call.marked
        and call.rank == 5
    )
    assert "with 1 step per rank the step-to-step noise cannot be measured" in call.reason
    close = {r: [100.0 + 3 * r] for r in range(8)}  # rank 7 leads, but rank 6 works nearly as long
    call = find_straggler(_steps(close))
    assert (
        call.rank == 7
        and not call.marked
        and "the spread among the other 7 ranks' work" in call.reason
    )


def test_two_ranks_of_one_step_cannot_name_a_straggler() -> None:
    call = find_straggler(_steps({0: [100.0], 1: [150.0]}))
    assert call.rank == 1 and call.noise_ms is None and not call.marked
    assert (
        "neither the step-to-step noise nor the spread among the ranks can be measured"
        in call.reason
    )
    assert "at least 3 steps per rank, or 4 ranks, are needed" in call.reason
    assert find_straggler(
        _steps({0: [100.0] * 3, 1: [150.0] * 3})
    ).marked  # three steps each: it is


def test_one_rank_has_no_straggler() -> None:
    call = find_straggler(_steps({3: [100.0, 101.0, 99.0]}))
    assert (
        call.rank is None
        and call.to_json() is None
        and call.reason == "One rank: there is no straggler to find."
    )


def test_a_breakdown_s_steps_judge_work_as_step_minus_exposed_communication() -> None:
    rows = [
        {"rank": r, "step": i, "step_ns": 110e6, "communication": (40e6 if r != 1 else 10e6)}
        for r in range(3)
        for i in range(4)
    ]
    call = find_in_steps(pd.DataFrame(rows))
    assert (
        call.rank == 1
        and call.work_ms == pytest.approx(100.0)
        and call.median_work_ms == pytest.approx(70.0)
    )
    assert call.marked and call.excess_share == pytest.approx(30 / 110)


def test_victims_wait_at_least_half_the_straggler_s_extra_work() -> None:
    s = find_straggler(
        _steps({0: [70.0] * 3, 1: [100.0] * 3, 2: [70.0] * 3, 3: [75.0] * 3})
    ).straggler
    assert (
        s is not None and s.rank == 1 and s.median_work_ms == 72.5
    )  # 27.5 ms extra work: victims wait 13.75
    found = victims(s, {0: 40.0, 1: 10.0, 2: 19.0, 3: 30.0})
    assert found == [
        {"rank": 0, "wait_ms": 30.0},
        {"rank": 3, "wait_ms": 20.0},
    ]  # rank 2 waits 9 ms more: not on it
