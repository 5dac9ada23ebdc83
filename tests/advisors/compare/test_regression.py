"""The regression gate's judgement: the statistic, the verdict rules, few steps, contention, movers — on the shared
real ResNet50 pair and on hand-made step samples."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from advisors.compare.contention import HostCpu
from advisors.verdict import Bottleneck
from advisors.compare.regression import EXIT_INCONCLUSIVE, MIN_STEPS, Side, check, check_json
from advisors.compare.sides import observe_side
from advisors.stats import median_ratio
from advisors.compare.step_samples import StepSamples
from profilers.errors import RunError, StepwiseError
from profilers.run.records import RunStatus
from profilers.store.runs import RunStore
from tests.app.fake_runs import fake_run

FAST = "compute/kineto_resnet50_num_workers_4.pt.trace.json.gz"  # the pair's base: 4 DataLoader workers
SLOW = "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"  # the same script loading in the main process
ONE_STEP = "host/tracelens_h100_bert-small.json.gz"


@pytest.fixture(scope="module")
def pair(shared_traces: Path) -> tuple[Side, Side]:
    return observe_side(shared_traces / FAST, "workers=4"), observe_side(
        shared_traces / SLOW, "workers=0"
    )


def _side(ms, cpu: HostCpu | None = None, label: str = "x") -> Side:
    return Side(
        label=label,
        samples=StepSamples(tuple(float(v) for v in ms), "run", "hand-made"),
        bottleneck=Bottleneck.NONE,
        headline=None,
        breakdown=None,
        device="cpu",
        cpu=cpu,
    )


def _noisy(median: float, n: int = 30, spread: float = 0.02, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median * np.exp(spread * rng.standard_normal(n)))


# -- the shared real pair -----------------------------------------------------------------------------------
def test_a_trace_against_itself_is_the_same(pair) -> None:
    base, _ = pair
    c = check(base, base)
    assert c.verdict == "same" and c.exit_code == 0 and c.ratio == 1.0
    assert c.estimate is not None and c.estimate.low <= 1 <= c.estimate.high


def test_the_resnet_pair_is_a_regression_that_names_the_dataloader(pair) -> None:
    base, new = pair
    c = check(base, new)
    doc = check_json(c)
    assert c.verdict == "regression" and c.exit_code == 1, c.reason
    # time per step: 1.25 (the typical steps: 1.39)
    assert doc["ratio"] > 1.2 and doc["interval"][0] > 1.0
    assert doc["base"]["steps"] == doc["new"]["steps"] == 6
    assert (
        doc["movers"]["categories"][0]["name"] == "dataloader"
        and doc["movers"]["categories"][0]["delta_ms"] > 50
    )
    assert (
        "DataLoader" in doc["movers"]["operators"][0]["name"]
        and doc["movers"]["operators"][0]["delta_ms"] > 50
    )
    assert "dataloader" in c.reason
    assert doc["bottleneck"] == {"base": "compute", "new": "data", "changed": True}
    json.dumps(doc)  # plain types only


def test_the_reverse_pair_is_an_improvement(pair) -> None:
    base, new = pair
    c = check(new, base)
    assert c.verdict == "improvement" and c.exit_code == 0, c.reason
    assert c.estimate is not None and c.estimate.high < 1
    assert c.movers.categories[0].name == "dataloader" and c.movers.categories[0].delta_ms < -50


def test_a_large_tolerance_lets_the_pair_through(pair) -> None:
    c = check(*pair, max_slowdown=0.5)
    assert c.verdict == "same" and "within the 50% tolerance" in c.reason


# -- few steps --------------------------------------------------------------------------------------------
def test_a_one_step_trace_against_itself_is_the_same_and_says_why(shared_traces: Path) -> None:
    s = observe_side(shared_traces / ONE_STEP)
    c = check(s, s)
    assert s.steps == 1 and c.verdict == "same" and c.estimate is None and c.ratio == 1.0
    assert check_json(c)["interval"] is None
    assert f"at least {MIN_STEPS} per side" in c.reason


def test_one_step_traces_cannot_prove_a_regression(shared_traces: Path) -> None:
    small = observe_side(shared_traces / ONE_STEP)
    big = observe_side(
        shared_traces / "data/tracelens_h100_owlv2.json.gz"
    )  # 1211 ms against 4.4 ms
    c = check(small, big)
    assert c.ratio > 100 and c.verdict == "inconclusive" and c.exit_code == EXIT_INCONCLUSIVE == 3
    assert "cannot prove a regression" in c.reason


# -- the verdict rules on hand-made samples -----------------------------------------------------------------
@pytest.mark.parametrize(
    "factor, verdict",
    [(1.0, "same"), (1.03, "same"), (1.2, "regression"), (1 / 1.2, "improvement"), (0.97, "same")],
)
def test_tolerance_and_noise(factor: float, verdict: str) -> None:
    c = check(_side(_noisy(100, seed=1)), _side(_noisy(100 * factor, seed=2)))
    assert c.verdict == verdict, c.reason


def test_a_slowdown_beyond_the_tolerance_but_within_the_noise_is_inconclusive() -> None:
    base, new = (
        _side(_noisy(100, n=5, spread=0.4, seed=3)),
        _side(_noisy(112, n=5, spread=0.4, seed=4)),
    )
    c = check(base, new)
    assert c.ratio > 1.05 and c.estimate is not None and c.estimate.low <= 1
    assert c.verdict == "inconclusive" and c.exit_code == 3 and "includes no change" in c.reason
    assert c.detectable is not None and c.detectable > c.ratio  # too noisy to see even this change
    assert (
        f"smallest slowdown the interval could tell from their noise is about "
        f"{c.detectable - 1:.0%}" in c.reason
    )


def test_swapping_the_sides_swaps_regression_and_improvement() -> None:
    a, b = _side(_noisy(100, seed=5)), _side(_noisy(130, seed=6))
    assert (check(a, b).verdict, check(b, a).verdict) == ("regression", "improvement")


def test_median_ratio_is_deterministic_and_brackets_its_point() -> None:
    a, b = _noisy(50, seed=7), _noisy(60, seed=8)
    est = median_ratio(a, b)
    assert est == median_ratio(a, b) and est.low < est.point < est.high
    assert est.point == pytest.approx(np.median(b) / np.median(a))
    with pytest.raises(ValueError):
        median_ratio([], [1.0])


# -- contention ---------------------------------------------------------------------------------------------
QUIET, BUSY = (
    HostCpu(cores=2, busy=1.35, ours=1.29),
    HostCpu(cores=2, busy=2.0, ours=0.97),
)  # measured pair


def test_a_run_held_back_by_other_programs_is_not_called() -> None:
    """Two runs of one spec measured 26.3 and 38.6 ms/step: the slow one while other programs used a core."""
    c = check(_side(_noisy(26.3), QUIET), _side(_noisy(38.6, seed=1), BUSY))
    assert c.contended and c.verdict == "inconclusive" and c.exit_code == 3
    assert "other programs used 1.03 of the machine's 2 cores during NEW" in c.reason
    assert check_json(c)["contention"]["suspected"] is True
    assert (
        check(_side(_noisy(38.6, seed=1), BUSY), _side(_noisy(26.3), QUIET)).verdict
        == "inconclusive"
    )


def test_a_neighbour_during_both_runs_bounds_each_run_on_its_own() -> None:
    """Another program holds the other core during both runs, measured apart: what it took from each is not known
    from the other (two runs of one script read 0.62 apart so), so a 1.42x slowdown is left open, and one beyond
    what a core's neighbour can cost on its own ((2 / 1)^1.5 = 2.83x) is still called."""
    one_core = HostCpu(cores=2, busy=2.0, ours=1.0)
    c = check(_side(_noisy(33), one_core), _side(_noisy(47, seed=1), one_core))
    assert c.contended and c.verdict == "inconclusive", c.reason
    far = check(_side(_noisy(33), one_core), _side(_noisy(110, seed=1), one_core))
    assert far.verdict == "regression", far.reason


def test_a_busy_neighbour_during_one_run_leaves_a_small_change_open() -> None:
    """Measured: 1.155x on runs of one spec, the machine idle during BASE and another program on the other core
    during NEW. A run left 1.0 of the 1.97 cores the other had free slows by up to 1.97^1.5 = 2.77x, so a 15% change
    cannot be told from it: the one contention rule (the A/B pairs' too) leaves it open."""
    idle, neighbour = HostCpu(cores=2, busy=1.03, ours=1.0), HostCpu(cores=2, busy=2.0, ours=1.0)
    c = check(_side(_noisy(33), idle), _side(_noisy(38.1, seed=1), neighbour))
    assert c.contended and c.verdict == "inconclusive"
    assert (
        "other programs used 1.00 of the machine's 2 cores during NEW and 0.03 during BASE"
        in c.reason
    )
    assert "slows down by up to 2.77x" in c.reason


def test_a_change_beyond_what_the_neighbour_could_make_is_called_and_noted() -> None:
    """Three times the step with a neighbour on a core during NEW: at most 2.77x of it is the neighbour's."""
    idle, neighbour = HostCpu(cores=2, busy=1.03, ours=1.0), HostCpu(cores=2, busy=2.0, ours=1.0)
    c = check(_side(_noisy(33), idle), _side(_noisy(99, seed=1), neighbour))
    assert not c.contended and c.verdict == "regression"
    assert any(
        "which cannot explain this verdict" in n and "slow NEW by at most 2.77x" in n
        for n in c.notes
    )


def test_the_same_with_a_neighbour_during_base_could_hide_a_regression() -> None:
    """BASE slowed by a neighbour and NEW not: equal medians could hide NEW being slower. "The same" must stand
    beyond contention too, or the gate would pass a regression the neighbour masked."""
    idle, neighbour = HostCpu(cores=2, busy=1.03, ours=1.0), HostCpu(cores=2, busy=2.0, ours=1.0)
    c = check(_side(_noisy(33), neighbour), _side(_noisy(33, seed=1), idle))
    assert (
        c.verdict == "inconclusive"
        and c.contended
        and "could hide a change beyond the tolerance" in c.reason
    )
    quiet = check(_side(_noisy(33), idle), _side(_noisy(33, seed=1), idle))
    assert quiet.verdict == "same" and not quiet.contended


# -- runs -------------------------------------------------------------------------------------------------
def test_a_run_side_is_its_measured_steps(tmp_path: Path) -> None:
    record = fake_run(RunStore(tmp_path / "runs"))
    s = observe_side(record.run_dir)
    assert s.samples.kind == "run" and s.samples.ms == (
        52.0,
        50.0,
        51.0,
    )  # after 3 warm-up steps, unprofiled
    assert s.step_time_ms == 51.0 and "3 measured steps after 3 warm-up steps" == s.samples.what
    assert s.cpu is None  # its telemetry has no machine-wide figures (system CPU, core count)


def test_a_failed_run_or_a_snapshot_cannot_be_compared(tmp_path: Path, shared_traces: Path) -> None:
    record = fake_run(RunStore(tmp_path / "runs"), status=RunStatus.FAILED)
    with pytest.raises(RunError, match="the run ended failed"):
        observe_side(record.run_dir)
    with pytest.raises(StepwiseError, match="memory snapshot"):
        observe_side(shared_traces / "memory/cs336_memory_snapshot.pickle")


def test_a_run_and_a_trace_compare_with_a_note(tmp_path: Path, shared_traces: Path) -> None:
    run = observe_side(fake_run(RunStore(tmp_path / "runs")).run_dir)
    c = check(run, observe_side(shared_traces / FAST))
    assert any("measured differently" in n for n in c.notes) and any(
        "ran on cpu" in n for n in c.notes
    )


def test_a_script_run_is_measured_on_the_steps_it_timed(tmp_path: Path) -> None:
    """A script run (``optimize -- python train.py``) times ``measure`` steps after ``warmup``, without profiler."""
    from profilers.run.records import RunResult

    store = RunStore(tmp_path / "runs")
    record = store.create(
        "launch", "train.py", files={"boot.json": {"warmup": 3, "measure": 5, "profile": 2}}
    )
    walls = (
        [100.0] * 3 + [10.0, 11.0, 12.0, 11.0, 10.0] + [60.0] * 3
    )  # warm-up, timed, profiler warm-up + window
    rows = [
        {
            "rank": 0,
            "step": i,
            "wall_ms": w,
            "loss": 1.0,
            "samples": 8,
            "profiled": i >= 9,
            "t_unix_ns": i,
        }
        for i, w in enumerate(walls)
    ]
    (Path(record.run_dir) / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    store.finish(record.run_id, RunResult(status=RunStatus.OK, steps_done=len(walls)))
    s = observe_side(record.run_dir)
    assert (
        s.samples.ms == (10.0, 11.0, 12.0, 11.0, 10.0)
        and s.samples.what == "5 timed steps after 3 warm-up steps"
    )
