"""The watch's trigger rules (:mod:`stepwise_agent.trigger`): a sustained rise beyond the noise fires once, a burst
or a steady noisy run does not, a batch-drawing share jump fires, steady memory growth fires, and the rate limit
holds captures back."""

from __future__ import annotations

import random

from stepwise_agent.trigger import (DATA_SHARE, MEMORY, MIN_BASELINE, RECENT, STEP_TIME, WARMUP_STEPS, Fired,
                                    RateLimit, Trigger, near_capture)


def _feed(trigger: Trigger, walls: list[float], datas: list[float | None] | None = None,
          memory: list[float] | None = None) -> list[Fired]:
    fired = []
    for i, w in enumerate(walls):
        f = trigger.observe(i, w, datas[i] if datas else None, memory[i] if memory else None)
        if f is not None:
            fired.append(f)
    return fired


def _noisy(n: int, centre: float, spread: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [centre * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_a_steady_noisy_run_never_fires() -> None:
    for seed in range(12):
        assert _feed(Trigger(), _noisy(1000, 40.0, 0.3, seed)) == []


def test_a_sustained_rise_fires_once_within_recent_steps_and_names_the_rise() -> None:
    walls = _noisy(100, 40.0, 0.1, 1) + _noisy(200, 60.0, 0.1, 2)
    fired = _feed(Trigger(), walls)
    assert len(fired) == 1 and fired[0].kind == STEP_TIME
    assert 100 <= fired[0].step < 100 + RECENT + 2
    assert "step time +" in fired[0].reason and "for 8 steps" in fired[0].reason


def test_a_short_burst_is_not_a_shift() -> None:
    walls = _noisy(100, 40.0, 0.1, 3) + [120.0] * 4 + _noisy(100, 40.0, 0.1, 4)
    assert _feed(Trigger(), walls) == []


def test_nothing_fires_before_the_baseline_is_learnt() -> None:
    short = [40.0] * (WARMUP_STEPS + MIN_BASELINE - 1) + [200.0] * RECENT
    assert _feed(Trigger(), short) == []  # the baseline needs MIN_BASELINE steps older than the RECENT judged
    assert len(_feed(Trigger(), [40.0] + short)) == 1


def test_a_batch_drawing_share_jump_fires_even_when_the_step_time_hides_it() -> None:
    walls = _noisy(300, 40.0, 0.05, 5)
    datas = [w * 0.05 for w in walls[:150]] + [w * 0.5 for w in walls[150:]]
    fired = _feed(Trigger(), walls, datas)
    assert [f.kind for f in fired] == [DATA_SHARE]
    assert "batch drawing 5% → 50% of the step" in fired[0].reason


def test_steady_memory_growth_toward_the_limit_fires_and_flat_memory_does_not() -> None:
    walls = [40.0] * 200
    flat = [1000.0 + (i % 3) for i in range(200)]
    assert _feed(Trigger(limit_mb=4000.0), walls, memory=flat) == []
    creeping = [1000.0] * 60 + [1000.0 + 5.0 * i for i in range(140)]
    fired = _feed(Trigger(limit_mb=4000.0), walls, memory=creeping)
    assert fired and fired[0].kind == MEMORY and "limit of 4000 MiB" in fired[0].reason
    assert _feed(Trigger(limit_mb=None), walls, memory=creeping) == []


def test_a_small_leak_fires_on_a_host_with_much_free_memory_and_says_its_numbers() -> None:
    """Issue 44: a 2.2 MiB-a-step leak (keeps_tensors.py) grew ~110 MiB in the 50-step window, under the floor of
    0.5% of 22 GiB free: the capture depended on the free memory at start (1 run in 6 fired none)."""
    walls = [40.0] * 200
    creeping = [400.0] * 70 + [400.0 + 2.2 * i for i in range(130)]
    fired = _feed(Trigger(limit_mb=22_500.0), walls, memory=creeping)
    assert fired and fired[0].kind == MEMORY and fired[0].step < 70 + 50
    numbers = fired[0].to_json()["numbers"]
    assert isinstance(numbers, dict) and 1.0 < numbers["mb_per_step"] <= 2.2 and numbers["limit_mb"] == 22_500.0


def test_after_a_fire_the_new_level_is_the_new_normal() -> None:
    walls = _noisy(100, 40.0, 0.1, 6) + _noisy(600, 80.0, 0.1, 7)
    assert len(_feed(Trigger(), walls)) == 1


def test_the_rate_limit_caps_an_hour_and_the_share_of_the_run() -> None:
    now = [0.0]
    rate = RateLimit(per_hour=2, max_share=0.05, clock=lambda: now[0])
    now[0] = 100.0
    assert rate.refusal() is None
    rate.started()
    rate.spent(1.0)
    now[0] = 200.0
    assert rate.refusal() is None
    rate.started()
    rate.spent(1.0)
    now[0] = 300.0
    assert "2 captures in the last hour" in (rate.refusal() or "")
    now[0] = 4000.0
    assert rate.refusal() is None
    rate.spent(400.0)
    assert "of the run's time" in (rate.refusal() or "")


def test_steps_inside_or_just_after_a_capture_are_near_it() -> None:
    assert near_capture(10, [(11, 13)]) and near_capture(15, [(11, 13)])
    assert not near_capture(9, [(11, 13)]) and not near_capture(16, [(11, 13)])


def test_a_step_time_shift_does_not_forget_a_memory_trend() -> None:
    walls = [40.0] * 100 + [80.0] * 100
    creeping = [1000.0] * 95 + [1000.0 + 5.0 * i for i in range(105)]
    fired = _feed(Trigger(limit_mb=4000.0), walls, memory=creeping)
    assert [f.kind for f in fired][:2] == [STEP_TIME, MEMORY]
    assert fired[1].step < 150  # a memory window restarted at the shift (step ~101) could not fire before ~157
