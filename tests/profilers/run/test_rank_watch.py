"""The rank watch's decision (profilers/run/rank_watch.py) on synthetic per-rank step records: under DDP every
rank's wall is the same, so a rank falling behind shows only in its work (wall minus backward); the one straggler
rule judges it; the request asks that rank and its neighbour to profile the same steps."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from profilers.run.rank_watch import (
    CAPTURE_STEPS,
    CONFIRM,
    MAX_PER_HOUR,
    RANK_BEHIND,
    WINDOW,
    RankFollower,
    RankWatch,
    rank_follower,
    work_ms,
)

CHANGE_AT = 40
#: the rule fires within this many steps of the change: a window whose median moved (WINDOW // 2 + 1 slow steps)
#: marked CONFIRM times in a row
WITHIN = WINDOW // 2 + CONFIRM + 1


def rows(
    step: int,
    ranks: int,
    slow: int | None = None,
    extra_ms: float = 20.0,
    seed: int = 0,
    profiled: bool = False,
) -> list[dict[str, Any]]:
    """One step's rows: every rank's wall is the same (the fast ones wait in backward for the slowest)."""
    rng = random.Random(seed * 1000 + step)
    works = [10.0 + rng.uniform(-0.5, 0.5) + (extra_ms if r == slow else 0.0) for r in range(ranks)]
    wall = max(works) + 8.0
    return [
        {"rank": r, "step": step, "wall_ms": wall, "backward_ms": wall - w, "profiled": profiled}
        for r, w in enumerate(works)
    ]


def run(watch: RankWatch, steps: range, **kw: Any) -> list[tuple[int, Any]]:
    fired = []
    for s in steps:
        for row in rows(
            s,
            watch.world_size,
            slow=kw.get("slow") if s >= kw.get("change_at", CHANGE_AT) else None,
            seed=kw.get("seed", 0),
        ):
            watch.feed(row)
        call = watch.judge_now()
        if call is not None:
            fired.append((watch.fired_step, call))
    return fired


def test_work_is_the_wall_minus_backward_and_unknown_without_backward() -> None:
    assert work_ms({"wall_ms": 30.0, "backward_ms": 12.5}) == 17.5
    assert (
        work_ms({"wall_ms": 30.0, "backward_ms": None}) is None
        and work_ms({"wall_ms": 30.0}) is None
    )


def test_a_rank_falling_behind_fires_once_within_the_stated_steps_naming_it_and_its_neighbour() -> (
    None
):
    watch = RankWatch(2)
    fired = run(watch, range(120), slow=1)
    assert len(fired) == 1  # one episode, one request
    step, call = fired[0]
    assert call.rank == 1 and call.marked and CHANGE_AT <= step <= CHANGE_AT + WITHIN
    request = watch.request(call, 3)
    assert request["ranks"] == [0, 1] and request["steps"] == CAPTURE_STEPS
    assert (
        request["at_step"] > watch.last_step
    )  # ahead of every rank: all read the request before it
    trigger = request["trigger"]
    assert (
        trigger["kind"] == RANK_BEHIND
        and trigger["step"] == step
        and trigger["numbers"]["rank"] == 1
    )
    assert trigger["reason"].startswith(
        f"rank 1 behind the others by +{call.excess_share:.0%} for {WINDOW} steps"
    )


def test_steady_ranks_and_equal_walls_fire_nothing() -> None:
    for seed in range(5):
        assert run(RankWatch(2), range(200), slow=None, seed=seed) == []
        assert run(RankWatch(4), range(200), slow=None, seed=seed) == []


def test_the_neighbour_is_the_next_rank_in_the_ring() -> None:
    watch = RankWatch(4)
    [(_, call)] = run(watch, range(100), slow=3)
    assert (
        call.rank == 3
        and watch.request(call, 20)["ranks"] == [0, 3]
        and watch.request(call, 20)["steps"] == 20
    )


def test_a_new_episode_fires_again_and_profiled_steps_are_not_judged() -> None:
    watch = RankWatch(2)
    assert len(run(watch, range(80), slow=1)) == 1
    assert (
        run(watch, range(80, 120), slow=None, change_at=0) == []
    )  # it caught up: the episode ends
    for s in range(120, 124):  # a capture's steps: slow for the profiler, not for the rank
        for row in rows(s, 2, slow=0, extra_ms=80.0, profiled=True):
            watch.feed(row)
    assert watch.judge_now() is None
    [(step, call)] = run(watch, range(124, 200), slow=0, change_at=150)
    assert call.rank == 0 and 150 <= step <= 150 + WITHIN


def test_at_most_the_hourly_cap_of_requests() -> None:
    now = [0.0]
    watch = RankWatch(2, clock=lambda: now[0])
    fired = 0
    for episode in range(MAX_PER_HOUR + 2):
        base = episode * 80
        fired += len(run(watch, range(base, base + 40), slow=1, change_at=base))
        run(watch, range(base + 40, base + 80), slow=None)
    assert fired == MAX_PER_HOUR


def test_the_follower_reads_the_rows_as_they_come_and_writes_the_request(tmp_path: Path) -> None:
    (tmp_path / "launch.json").write_text(json.dumps({"nproc_per_node": 2, "nnodes": 1}))
    follower = rank_follower(tmp_path, {"watch": {"capture_steps": 3}})
    assert isinstance(follower, RankFollower)
    lines = [
        json.dumps(r) for s in range(100) for r in rows(s, 2, slow=1 if s >= CHANGE_AT else None)
    ]
    with open(tmp_path / "steps.jsonl", "w") as fh:
        fh.write("\n".join(lines[:50]) + "\n" + lines[50][:20])  # a line still being written
    assert follower.tick() is None
    with open(tmp_path / "steps.jsonl", "a") as fh:
        fh.write(lines[50][20:] + "\n" + "\n".join(lines[51:]) + "\n")
    request = follower.tick()
    assert request is not None and request["ranks"] == [0, 1]
    assert json.loads((tmp_path / "capture.request").read_text()) == request
    assert rank_follower(tmp_path / "none", {"watch": {}}) is None  # one rank: nothing to compare


def test_an_odd_window_inside_an_episode_does_not_fire_it_again() -> None:
    watch = RankWatch(2)
    assert len(run(watch, range(70), slow=1)) == 1
    assert (
        run(watch, range(70, 73), slow=None) == []
    )  # three steps in step unmark the windows that hold them
    assert (
        run(watch, range(73, 140), slow=1, change_at=0) == []
    )  # the same episode: no second request
