"""One samples/s and one step time per run: the run's own result, the Runs list and an A/B trial of it all read
the same measured steps (:func:`profilers.run.records.measured_steps`) and one formula
(:func:`stepwise_agent.steady.samples_per_s`)."""

from __future__ import annotations

import pandas as pd
import pytest

from advisors.experiments.trials import measured_trial
from profilers.run.records import measured_steps, summarise_steps
from stepwise_agent.steady import samples_per_s


def prefetching_run(steps: int = 16, profiled: tuple[int, ...] = (12, 13)) -> pd.DataFrame:
    """A loader with workers that prefetch: every other step waits for a batch (90 ms), the rest find one ready
    (10 ms): the batch over the median step and the total over the total disagree by far."""
    return pd.DataFrame(
        [
            {
                "rank": 0,
                "step": i,
                "wall_ms": 90.0 if i % 2 else 10.0,
                "samples": 32.0,
                "profiled": i in profiled,
                "loss": 1.0,
                "data_ms": 80.0 if i % 2 else 0.5,
            }
            for i in range(steps)
        ]
    )


def test_samples_per_s_is_the_total_over_the_total() -> None:
    assert samples_per_s([32, 32], [10.0, 90.0]) == pytest.approx(640.0)
    assert (
        samples_per_s([], []) is None
        and samples_per_s([0], [10.0]) is None
        and samples_per_s([8], [0]) is None
    )


def test_a_run_and_its_trial_show_one_samples_per_s() -> None:
    steps = prefetching_run()
    result = summarise_steps(steps, pd.DataFrame(), warmup_steps=3)
    trial = measured_trial(steps, warmup_steps=3)
    m = measured_steps(steps, warmup_steps=3)
    assert m is not None and trial is not None
    assert result.samples_per_s == pytest.approx(trial.throughput) == pytest.approx(m.samples_per_s)
    # the steps: past the warm-up, not profiled, not next to the profiler's window (11 before, 14 and 15 after)
    assert m.steps == tuple(range(3, 11)) and m.basis == "steady"
    assert result.step_time_steps == len(trial.walls_ms) == 8
    # the time per step is elapsed ÷ steps: × samples/s it is the batch, even where the median step
    # is far off
    uneven = steps.assign(wall_ms=[10.0 if i % 4 else 130.0 for i in range(len(steps))])
    r2, t2 = summarise_steps(uneven, pd.DataFrame(), 3), measured_trial(uneven, 3)
    assert t2 is not None and r2.samples_per_s == pytest.approx(t2.throughput)
    assert r2.samples_per_s == pytest.approx(32 / r2.step_time_ms * 1e3)
    # 3 × 10 ms + 130 ms, over 4
    assert r2.step_time_ms == pytest.approx(t2.mean_ms) == pytest.approx(40.0)
    # 2 of 8 steps stalled
    assert r2.typical_step_ms == 10.0 and r2.stalled_share == pytest.approx(0.25)


def test_ranks_wait_for_the_slowest_and_their_samples_add_up() -> None:
    rows = [
        {
            "rank": k,
            "step": i,
            "wall_ms": 20.0 + 5 * k,
            "samples": 16.0,
            "profiled": False,
            "loss": 1.0,
        }
        for i in range(10)
        for k in (0, 1)
    ]
    m = measured_steps(pd.DataFrame(rows), warmup_steps=2)
    assert m is not None and set(m.walls_ms) == {25.0} and set(m.samples) == {32.0}
    assert m.samples_per_s == pytest.approx(32 / 25 * 1e3)
