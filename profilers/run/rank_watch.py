"""A rank falling behind the others, seen from outside the job: the runner reads every rank's ``steps.jsonl``
rows as they come and asks that rank and its neighbour to profile the same steps.

Under DDP every rank's step wall is the same (the ranks done first wait in the gradients' all-reduce for the
slowest), so the wall cannot show which rank is behind. Each row's ``backward_ms`` (the agent's time inside the
step's backward calls, where that all-reduce waits) can: a rank's **work** in a step is its wall minus its
backward time (:func:`work_ms`), what it does itself before the others' wait ends. Whether one rank's work stands
out is the one straggler rule (:func:`profilers.jobs.straggler.find_straggler`: a lead over the median rank beyond
twice the noise), judged here over the last :data:`WINDOW` steps that every rank has finished, leaving out the
warm-up, profiled steps and the steps just after a capture. When the same rank is marked by :data:`CONFIRM`
judgements in a row (windows ending at consecutive steps), :class:`RankWatch` writes ``capture.request`` for that rank and its
neighbour in the ring (``(R + 1) % N``) to profile :data:`CAPTURE_STEPS` steps (or ``--capture-steps`` if more),
starting at a step a little ahead of the slowest rank (both windows line
up), with the trigger ``rank R behind the others by +X% for N steps``. One rank's episode fires once: it fires
again only after :data:`WINDOW` judgements in a row that did not mark it (a few odd steps unmark every window
that holds them, which must not end it), and the runner asks at most :data:`MAX_PER_HOUR` times
an hour (the agents capture what it asks whatever their own rate limit: every rank asked must capture, or the
job's capture would lack the rank it is about).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from profilers.jobs.straggler import StragglerCall, find_straggler
from profilers.store.files import write_json_atomic
from stepwise_agent.step_log import OPEN, STEPS

RANK_BEHIND = "rank_behind"  # the trigger's kind in capture.json
WINDOW = 10  # steps every rank finished, judged at once
CONFIRM = (
    3  # judgements in a row (windows ending at consecutive steps) that must mark the same rank
)
WARMUP_STEPS = 5  # as stepwise_agent.trigger.WARMUP_STEPS: never judged
AFTER_CAPTURE = 3  # steps after a profiled one left out (the profiler's cost settles)
LEAD_S = 1.5  # the capture starts this far (in time) ahead of the slowest rank: every rank reads the request first
REQUEST_FILE = "capture.request"  # stepwise_agent.watch.REQUEST_FILE
CAPTURE_STEPS = (
    12  # the least steps such a capture profiles: the straggler rule measures a rank's step-to-step
)
# noise in them (an interquartile range). Over 3 steps it hid a rank working 26% of the step more than the other;
# over 8, two steps slowed by a busy host (150-190 ms in a 60 ms run) set the 75th percentile and hid one working
# 33% more; over 12 two such steps stay above it
MAX_PER_HOUR = 6  # requests an hour, as the agents' own limit (stepwise_agent.trigger.MAX_PER_HOUR)


def work_ms(row: dict[str, Any]) -> float | None:
    """A step row's work: its wall minus its time inside backward (None: the agent measured no backward)."""
    wall, backward = row.get("wall_ms"), row.get("backward_ms")
    if not isinstance(wall, (int, float)) or not isinstance(backward, (int, float)):
        return None
    return max(float(wall) - float(backward), 0.0)


def judge(window: dict[int, list[tuple[float, float]]]) -> StragglerCall:
    """The straggler rule over one window: each rank's ``(wall ms, work ms)`` per step."""
    return find_straggler(window)


def behind_reason(call: StragglerCall, steps: int) -> str:
    """The trigger's words for a marked rank."""
    return (
        f"rank {call.rank} behind the others by +{call.excess_share:.0%} for {steps} steps (its work "
        f"{call.work_ms:.1f} ms a step against the median rank's {call.median_work_ms:.1f} ms, beyond twice "
        f"the noise)"
    )


class RankWatch:
    """Feed it rows (:meth:`feed`); :meth:`judge_now` says when a rank fell behind (see the module docs)."""

    def __init__(
        self, world_size: int, window: int = WINDOW, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.world_size, self.window = world_size, window
        self._steps: dict[int, dict[int, tuple[float, float]]] = {}  # step -> rank -> (wall, work)
        self._judged = 0  # the last step judged
        self._marks: deque[int | None] = deque(maxlen=CONFIRM)
        self._fired_for: int | None = None
        self._unmarked = 0  # judgements in a row that did not mark the rank fired for
        self._skip_until = WARMUP_STEPS
        self.last_step = -1
        self.fired_step = -1  # the step the last request fired at
        self._clock = clock
        self._fired_at: list[float] = []

    def _allowed(self) -> bool:
        """At most :data:`MAX_PER_HOUR` requests in any hour (the agents' own rate limit does not apply to them)."""
        now = self._clock()
        return sum(1 for t in self._fired_at if now - t < 3600.0) < MAX_PER_HOUR

    def feed(self, row: dict[str, Any]) -> None:
        step, rank = int(row.get("step", -1)), int(row.get("rank", 0))
        self.last_step = max(self.last_step, step)
        if row.get("profiled"):
            self._skip_until = max(self._skip_until, step + AFTER_CAPTURE + 1)
            self._marks.clear()
            return
        work = work_ms(row)
        if (
            step < self._skip_until
            or work is None
            or not isinstance(row.get("wall_ms"), (int, float))
        ):
            return
        self._steps.setdefault(step, {})[rank] = (float(row["wall_ms"]), work)

    def judge_now(self) -> StragglerCall | None:
        """Judge every step all ranks finished since the last call; the marked call when a rank is newly behind."""
        fired: StragglerCall | None = None
        for step in sorted(
            s for s, by in self._steps.items() if s > self._judged and len(by) >= self.world_size
        ):
            self._judged = step
            if step < self._skip_until:
                continue
            full = sorted(
                s
                for s in self._steps
                if s <= step and len(self._steps[s]) >= self.world_size and s >= self._skip_until
            )[-self.window :]
            if len(full) < self.window:
                continue
            call = judge({r: [self._steps[s][r] for s in full] for r in range(self.world_size)})
            self._marks.append(call.rank if call.marked else None)
            if (
                self._fired_for is not None
            ):  # its episode ends after a window of judgements without it
                self._unmarked = (
                    0 if call.marked and call.rank == self._fired_for else self._unmarked + 1
                )
                if self._unmarked >= self.window:
                    self._fired_for = None
            if (
                call.marked
                and len(self._marks) == CONFIRM
                and len(set(self._marks)) == 1
                and call.rank != self._fired_for
                and fired is None
                and self._allowed()
            ):
                self._fired_for, fired, self.fired_step, self._unmarked = call.rank, call, step, 0
                self._fired_at.append(self._clock())
        for step in [s for s in self._steps if s < self._judged - 2 * self.window]:
            del self._steps[step]
        return fired

    def request(self, call: StragglerCall, capture_steps: int) -> dict[str, Any]:
        """The ``capture.request`` for a marked rank and its neighbour, at a step ahead of the slowest rank."""
        assert call.rank is not None
        walls = [w for by in self._steps.values() for w, _ in by.values()][-50:]
        ahead = (
            max(2, min(200, math.ceil(LEAD_S * 1000.0 / max(statistics.median(walls), 1e-3))))
            if walls
            else 2
        )
        trigger = {
            "kind": RANK_BEHIND,
            "step": self.fired_step,
            "reason": behind_reason(call, self.window),
            "numbers": {
                "rank": float(call.rank),
                "excess_share": round(call.excess_share, 4),
                "work_ms": round(call.work_ms, 3),
                "median_work_ms": round(call.median_work_ms, 3),
            },
        }
        return {
            "steps": max(capture_steps, CAPTURE_STEPS),
            "ranks": sorted({call.rank, (call.rank + 1) % self.world_size}),
            "at_step": self.last_step + ahead,
            "trigger": trigger,
            "job": f"{RANK_BEHIND}-{self.fired_step}",
            "t_unix": time.time(),
        }


class RankFollower:
    """The runner's side: reads each rank's new rows at each tick and writes the request when a rank fell behind.

    The agent's step log (:mod:`stepwise_agent.step_log`) writes a row to ``steps.jsonl`` only once it is decided
    (:data:`~stepwise_agent.step_log.AROUND` steps later, and past the first steps only inside a capture's window);
    until then each rank's newest rows are in its ``steps_open.rank{R}.jsonl``, rewritten twice a second. Both are
    read, and each rank's rows are fed once, in step order: the judgement is never 64 steps late, nor blind past
    the steps kept whole."""

    def __init__(self, run_dir: Path, world_size: int, capture_steps: int) -> None:
        self.run_dir, self.capture_steps = run_dir, capture_steps
        self.watch = RankWatch(world_size)
        self._offset = 0
        self._fed: dict[int, int] = {}  # rank -> the last step fed

    def _new_lines(self) -> list[bytes]:
        try:
            with open(self.run_dir / STEPS, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except OSError:
            return []
        complete = data[
            : data.rfind(b"\n") + 1
        ]  # a line still being written is read at the next tick
        self._offset += len(complete)
        lines = complete.splitlines()
        for path in sorted(self.run_dir.glob(OPEN.format(rank="*"))):
            try:
                lines += path.read_bytes().splitlines()  # rewritten whole (atomically) by the agent
            except OSError:
                continue
        return lines

    def tick(self) -> dict[str, Any] | None:
        rows = []
        for line in self._new_lines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and isinstance(row.get("step"), int):
                rows.append(row)
        for row in sorted(rows, key=lambda r: int(r["step"])):
            rank = int(row.get("rank") or 0)
            if row["step"] > self._fed.get(rank, -1):
                self._fed[rank] = row["step"]
                self.watch.feed(row)
        call = self.watch.judge_now()
        if call is None:
            return None
        request = self.watch.request(call, self.capture_steps)
        write_json_atomic(self.run_dir / REQUEST_FILE, request)
        return request


def rank_follower(run_dir: Path, boot: dict[str, Any]) -> RankFollower | None:
    """The follower of a watched run of two or more ranks (``launch.json``: ``nproc_per_node`` × ``nnodes``), else
    None. Only this node's ranks write to its run folder: a job of several nodes is followed where all write."""
    from profilers.store.files import read_json

    launch = read_json(run_dir / "launch.json")
    launch = launch if isinstance(launch, dict) else {}
    world = int(launch.get("nproc_per_node") or 1) * int(launch.get("nnodes") or 1)
    raw = boot.get("watch")
    watch: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return RankFollower(run_dir, world, int(watch.get("capture_steps") or 3)) if world > 1 else None
