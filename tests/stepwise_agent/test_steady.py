"""The steps a run's one step time is the median of (stepwise_agent.steady)."""

from __future__ import annotations

from stepwise_agent.steady import (
    AFTER_PROFILER,
    BASIS_NEAR,
    BASIS_PROFILED,
    BASIS_STEADY,
    choose_steps,
    describe,
    median_of,
)


def _window(n: int, first_profiled: int, active: int) -> list[bool]:
    return [first_profiled <= i < first_profiled + active for i in range(n)]


def test_warmup_profiled_and_the_steps_next_to_the_profiler_are_left_out() -> None:
    # 20 steps, warm-up 3, profiled 5..7: step 4 (profiler starts) and 8, 9 (export, buffers freed) are out
    prof = _window(20, 5, 3)
    choice = choose_steps(list(range(20)), prof, warmup_steps=3)
    assert choice.basis == BASIS_STEADY
    assert list(choice.positions) == [3] + list(range(5 + 3 + AFTER_PROFILER, 20))
    assert choice.profiled == (5, 6, 7)
    assert describe(choice) == f"over {choice.count} steady steps"


def test_the_median_ignores_the_slow_steps_after_the_profiler_stops() -> None:
    # the dashboard walk's run: steady steps of ~40 ms, the two steps after the profiler stopped at 84 and 95 ms
    walls = [
        500.0,
        41.0,
        40.0,
        39.0,
        42.0,
        70.0,
        71.0,
        72.0,
        84.0,
        95.0,
        38.0,
        43.0,
        40.0,
        41.0,
        39.0,
    ]
    prof = [False] * 5 + [True] * 3 + [False] * 7
    choice = choose_steps(list(range(len(walls))), prof, warmup_steps=1)
    assert median_of(walls, choice.positions) == 40.0
    assert median_of(walls, choice.profiled) == 71.0


def test_a_short_run_widens_its_basis_and_says_so() -> None:
    prof = _window(
        8, 2, 3
    )  # warm-up 1, profiled 2..4: one steady step (7); 1 before it and 5, 6 after it
    choice = choose_steps(list(range(8)), prof, warmup_steps=1)
    assert choice.basis == BASIS_NEAR and list(choice.positions) == [1, 5, 6, 7]
    assert "too few steady steps" in describe(choice)
    tiny = choose_steps(list(range(4)), [False, True, True, False], warmup_steps=1)
    assert tiny.basis == BASIS_PROFILED and list(tiny.positions) == [1, 2, 3]


def test_a_window_of_a_run_counts_its_warmup_from_the_runs_first_step() -> None:
    steps = list(
        range(3, 13)
    )  # a script trial's timed window: steps 3..12, warm-up 3 already behind it
    choice = choose_steps(steps, [False] * 10, warmup_steps=3, first_step=0)
    assert choice.count == 10
    assert (
        choose_steps(steps, [False] * 10, warmup_steps=3).count == 7
    )  # counted from the window's own start


def test_the_agent_times_each_steps_batch_drawing_without_the_profiler() -> None:
    """The data fixes' bound rests on this: the time a step spent in DataLoader.__next__, step by step."""
    import time

    import torch
    from torch.utils.data import DataLoader, Dataset

    from stepwise_agent.steps import StepDetector

    class Slow(Dataset):
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int) -> torch.Tensor:
            time.sleep(0.002)  # 4 samples a batch: about 8 ms drawing each batch
            return torch.ones(3)

    seen: list[float | None] = []
    detector = StepDetector(lambda loss, samples: seen.append(detector.last_data_ms))
    detector.install()
    try:
        w = torch.nn.Parameter(torch.ones(3))
        opt = torch.optim.SGD([w], lr=0.1)
        for x in DataLoader(Slow(), batch_size=4):
            (x @ w).sum().backward()
            opt.step()
            opt.zero_grad()
            if len(seen) == 5:
                break
    finally:
        detector.uninstall()
    assert len(seen) == 5 and all(v is not None and v >= 8.0 for v in seen), seen
