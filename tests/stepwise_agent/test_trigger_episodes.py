"""One episode, one capture (:mod:`stepwise_agent.trigger`): a slowdown that keeps holding after a
capture does not fire again until the step time is back within its noise; a new episode after a
clear stretch fires again; an episode that never clears becomes the run's new normal. Steps are
replayed as the watch feeds them (a capture's steps are not judged, and the baseline is learnt
afresh when it ends)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from stepwise_agent.trigger import (
    CPU_MIN_RISE,
    DATA_SHARE,
    SETTLE_S,
    STEP_TIME,
    Fired,
    Trigger,
    near_capture,
)
from stepwise_agent.watch import CAPTURE_STEPS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "watch"


def _watched(trigger: Trigger, walls: list[float], datas: list[float] | None = None) -> list[Fired]:
    """Replay step times through ``trigger`` as :class:`stepwise_agent.watch.WatchRecorder` does: a
    fire at step ``s`` profiles steps ``s+2 … s+1+CAPTURE_STEPS`` (``s+1`` the profiler's warm-up),
    those steps are not judged, the baseline is learnt afresh at the capture's end and the steps
    next to it are left out."""
    fired: list[Fired] = []
    windows: list[tuple[int, int]] = []
    capture_ends = -1
    for step, wall in enumerate(walls):
        if step <= capture_ends:
            if step == capture_ends:
                trigger.relearn(keep_memory=True)
            continue
        data = datas[step] if datas else None
        f = trigger.observe(step, wall, data, None, near_capture(step, windows))
        if f is not None:
            fired.append(f)
            windows.append((step + 2, step + 1 + CAPTURE_STEPS))
            capture_ends = step + 1 + CAPTURE_STEPS
    return fired


def _noisy(seconds: float, centre: float, spread: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [
        centre * (1 + rng.uniform(-spread, spread)) for _ in range(int(seconds * 1000 / centre))
    ]


def _phases(seconds: float, levels: list[float], seed: int) -> list[float]:
    """A neighbour's slowdown in phases of about two seconds (its own load comes and goes)."""
    out: list[float] = []
    while sum(out) < seconds * 1000:
        for i, level in enumerate(levels):
            out += _noisy(2.0, level, 0.12, seed + i)
        seed += len(levels)
    return out


QUIET = 80.0  # the steady CPU step of tests/scripts/watch/neighbour.py (ms)


def test_a_long_episode_of_a_neighbour_fires_once() -> None:
    """30 s of another program taking the cores: +90% on average, in phases of +50% to +200% as the
    recorded neighbour's steps went (136-230 ms on an 80-ms step). Relearnt from the slowed steps,
    its baseline would have been beaten by the neighbour's next high phase (a second capture of the
    same episode)."""
    quiet = _noisy(20.0, QUIET, 0.1, 1)
    episode = _phases(30.0, [120.0, 130.0, 240.0, 125.0, 250.0], 2)
    fired = _watched(Trigger(min_rise=CPU_MIN_RISE), quiet + episode + _noisy(10.0, QUIET, 0.1, 3))
    assert [f.kind for f in fired] == [STEP_TIME], [f.reason for f in fired]
    assert len(quiet) <= fired[0].step < len(quiet) + 2.0 * 1000 / 120.0 * 2


def test_a_flat_episode_of_plus_90_percent_fires_once_and_says_its_rise() -> None:
    quiet = _noisy(20.0, QUIET, 0.1, 4)
    trigger = Trigger(min_rise=CPU_MIN_RISE)
    fired = _watched(trigger, quiet + _noisy(30.0, 1.9 * QUIET, 0.1, 5))
    assert [f.kind for f in fired] == [STEP_TIME]
    numbers = dict(fired[0].numbers)
    assert (
        70.0 <= numbers["rise_pct"] <= 110.0 and f"+{numbers['rise_pct']:.0f}%" in fired[0].reason
    )
    assert abs(numbers["base_ms"] - QUIET) < 8.0 and numbers["now_ms"] > numbers["base_ms"]
    assert trigger.held  # still slowed: the episode has not cleared


def test_two_episodes_separated_by_a_clear_stretch_fire_twice() -> None:
    """The hold ends once the judged steps are back within the noise; the baseline before the first
    episode is the baseline again, so the second one fires within its judged time (no 10 s of
    learning first)."""
    quiet = _noisy(20.0, QUIET, 0.1, 6)
    first = _phases(25.0, [130.0, 240.0, 150.0], 7)
    clear = _noisy(8.0, QUIET, 0.1, 8)
    second = _noisy(10.0, 1.9 * QUIET, 0.1, 9)
    trigger = Trigger(min_rise=CPU_MIN_RISE)
    fired = _watched(trigger, quiet + first + clear + second)
    assert [f.kind for f in fired] == [STEP_TIME, STEP_TIME], [f.reason for f in fired]
    start = len(quiet) + len(first) + len(clear)
    assert start <= fired[1].step < start + 2.0 * 1000 / (1.9 * QUIET) * 1.5
    assert abs(dict(fired[1].numbers)["base_ms"] - QUIET) < 8.0  # judged against the quiet run


def test_a_stretch_too_short_to_judge_does_not_clear_the_episode() -> None:
    """Half a second of quiet steps inside an episode is not a judged window back in its noise."""
    quiet = _noisy(20.0, QUIET, 0.1, 10)
    slow = 1.9 * QUIET
    episode = (
        _noisy(10.0, slow, 0.1, 11) + _noisy(0.5, QUIET, 0.1, 12) + _noisy(15.0, slow, 0.1, 13)
    )
    assert len(_watched(Trigger(min_rise=CPU_MIN_RISE), quiet + episode)) == 1


def test_an_episode_that_never_clears_becomes_the_new_normal() -> None:
    """A shift held for SETTLE_S is the run's level: a further rise on top of it fires."""
    quiet = _noisy(20.0, QUIET, 0.05, 14)
    shifted = _noisy(SETTLE_S + 20.0, 2.0 * QUIET, 0.05, 15)
    further = _noisy(10.0, 4.0 * QUIET, 0.05, 16)
    fired = _watched(Trigger(min_rise=CPU_MIN_RISE), quiet + shifted + further)
    assert len(fired) == 2 and fired[1].step >= len(quiet) + len(shifted)
    assert abs(dict(fired[1].numbers)["base_ms"] - 2.0 * QUIET) < 10.0
    # before SETTLE_S the same further rise is the held episode's
    early = quiet + shifted[: len(shifted) // 4] + further
    assert len(_watched(Trigger(min_rise=CPU_MIN_RISE), early)) == 1


def test_a_batch_drawing_episode_is_held_until_its_share_is_back() -> None:
    walls = _noisy(20.0, 40.0, 0.05, 17) * 3
    n = len(walls) // 3
    share = [0.05] * n + [0.5] * n + [0.05] * (n // 2) + [0.5] * (len(walls) - n - n - n // 2)
    fired = _watched(Trigger(), walls, [w * s for w, s in zip(walls, share)])
    assert [f.kind for f in fired] == [DATA_SHARE, DATA_SHARE]
    assert dict(fired[0].numbers)["now_share"] >= 0.4 and fired[1].step >= 2 * n + n // 2


def test_the_recorded_neighbour_repeated_fires_once_an_episode() -> None:
    """The neighbour's recorded steps (tests/fixtures/watch: an 80-ms CPU step, the neighbour from
    step 240) played three times over (about 30 s), then the quiet steps before it, then the
    neighbour again."""
    recorded = json.loads((FIXTURES / "neighbour_steps_2026-11-29.json").read_text())
    walls = [float(w) for _, w, _ in recorded["steps"]]
    at = recorded["change_at"]
    quiet, neighbour = walls[:at], walls[at:]
    replay = quiet + neighbour * 3 + walls[60:at] + neighbour * 2
    fired = _watched(Trigger(min_rise=CPU_MIN_RISE), replay)
    assert [f.kind for f in fired] == [STEP_TIME, STEP_TIME], [f.reason for f in fired]
    second = len(quiet) + 3 * len(neighbour) + len(walls[60:at])
    assert at <= fired[0].step < at + 20 and second <= fired[1].step < second + 20
