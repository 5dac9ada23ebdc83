"""A watched job's ranks reduced over the whole run (:func:`profilers.run.rank_timeline.reduce_ranks`), fed the
step log's own files (synthetic rows, no training): every step counts, the rolled-up ones too; the one straggler
rule judges each rank's own work; a rank whose backward was not measured is said, not guessed."""

from __future__ import annotations

from pathlib import Path

import pytest

from profilers.run.rank_timeline import rank_steps, reduce_ranks
from profilers.run.step_records import rollups
from stepwise_agent.step_log import AROUND, KEEP_FIRST, StepLog

T0 = 1_700_000_000 * 10**9
STEPS = 3000
BEHIND_FROM = 600  # rank 1 falls behind here, for 80% of the run (a rank behind for half of it has a spread as
# wide as its lead: the rule's noise, the spread of a rank's own work, then keeps it unmarked)


def _write(
    run_dir: Path, rank: int, work: "callable[[int], float | None]", wall: float = 100.0
) -> None:
    log = StepLog(run_dir, rank)
    for step in range(STEPS):
        w = work(step)
        jitter = (step % 5) * 0.2
        backward = None if w is None else wall - w - jitter
        log.rows.append(
            (
                step,
                wall,
                2.0,
                32,
                1.0,
                False,
                T0 + int((step + 1) * wall * 1e6),
                512.0,
                None,
                backward,
            )
        )
    log.close()


def test_a_rank_that_falls_behind_in_the_rolled_up_steps_is_the_straggler(tmp_path: Path) -> None:
    _write(tmp_path, 0, lambda s: 30.0)  # rank 0 waits inside backward for rank 1
    _write(tmp_path, 1, lambda s: 60.0 if s >= BEHIND_FROM else 30.0)
    ups = rollups(tmp_path)
    assert ups and all(u["work_ms_median"] is not None for u in ups)
    assert (
        sum(u["steps"] for u in ups if u["rank"] == 1) == STEPS - KEEP_FIRST - AROUND
    )  # these steps live only there
    reduced = reduce_ranks(tmp_path)
    assert reduced is not None
    assert [r.rank for r in reduced.ranks] == [0, 1] and all(
        r.steps == STEPS for r in reduced.ranks
    )
    assert reduced.ranks[1].median_work_ms == pytest.approx(60.0, abs=1.0)
    assert reduced.ranks[0].median_work_ms == pytest.approx(30.0, abs=1.0)
    assert reduced.ranks[0].samples_per_s == pytest.approx(32 / 0.1)  # 32 samples a 100-ms step
    assert reduced.straggler_rank == 1 and reduced.reason.startswith("Straggler: rank 1")
    out = reduced.to_json()
    assert (
        out["straggler"] == 1 and len(out["ranks"]) == 2 and out["ranks"][1]["median_work_ms"] > 55
    )
    # the chart's steps carry the roll-ups too (a point per roll-up at its median)
    frame = rank_steps(tmp_path)
    assert frame[frame["rank"] == 1]["work_ms"].iloc[-1] == pytest.approx(60.0, abs=1.0)


def test_ranks_doing_the_same_work_mark_none(tmp_path: Path) -> None:
    _write(tmp_path, 0, lambda s: 30.0)
    _write(tmp_path, 1, lambda s: 30.0)
    reduced = reduce_ranks(tmp_path)
    assert reduced is not None and reduced.straggler_rank is None
    assert "no rank is marked" in reduced.reason


def test_a_rank_without_backward_is_said_not_judged(tmp_path: Path) -> None:
    _write(tmp_path, 0, lambda s: 30.0)
    _write(
        tmp_path, 1, lambda s: None
    )  # no backward measured: its own work cannot be told from its waiting
    reduced = reduce_ranks(tmp_path)
    assert reduced is not None and reduced.straggler is None and reduced.straggler_rank is None
    assert reduced.ranks[1].median_work_ms is None and reduced.ranks[1].median_step_ms == 100.0
    assert "rank(s) 1 recorded no time inside backward" in reduced.reason


def test_one_rank_is_not_reduced(tmp_path: Path) -> None:
    _write(tmp_path, 0, lambda s: 30.0)
    assert reduce_ranks(tmp_path) is None
