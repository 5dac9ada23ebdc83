"""An experiment's record says what its runs did: the runs per arm its verdict rests on (not the
runs asked for), arms' ms/step that multiply with their samples/s to the batch, and a gain past the
fix's upper bound flagged with why (``beyond_bound``), never a bare bound beside a larger gain."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from advisors.bounds import Bound
from advisors.experiments.experiment import Policy, run_experiment
from advisors.experiments.results.record import UNEXPLAINED, ExperimentRecord
from advisors.experiments.results.recording import bound_record, experiment_record
from advisors.experiments.trials import RunOutcome
from advisors.fixes import FIXES
from advisors.stats import Trial
from profilers.run.script_spec import ScriptSpec
from tests.advisors.fake_script import BASE, apply, knob

BATCH = 32.0
BOUND = Bound("cache_decoded", 0.6, 2.5, "if the time drawing batches vanished")


def _runner(
    base_ms: float, patched_ms: float, data_ms: float | None = None, stall_every: int = 0
) -> Any:
    """Trials of 15 steps: ``base_ms`` (``patched_ms`` with the cache), 1% noise; ``stall_every``:
    every Nth step of the baseline takes 4x (a loader that stalls); ``data_ms``: the baseline's
    batch drawing per step."""
    calls: list[ScriptSpec] = []

    def run(spec: ScriptSpec, on_progress: Any = None) -> RunOutcome:
        calls.append(spec)
        patched = bool(knob(spec, "cache_decoded"))
        rng = np.random.default_rng(len(calls))
        ms = patched_ms if patched else base_ms
        walls = [ms * (1 + 0.01 * rng.standard_normal()) for _ in range(15)]
        if stall_every and not patched:
            walls = [w * (4 if (i + 1) % stall_every == 0 else 1) for i, w in enumerate(walls)]
        data = None if data_ms is None else tuple(0.5 if patched else data_ms for _ in walls)
        trial = Trial(tuple(float(w) for w in walls), BATCH, data)
        return RunOutcome("ok", trial, 700.0, (2.3, 1.0), 20, None, f"fake-{len(calls)}")

    return run


def _record(trials: int, runner: Any, bound: Bound | None = None) -> ExperimentRecord:
    policy = Policy(trials=trials, n_boot=400)
    e = run_experiment(BASE, FIXES["cache_decoded"], runner, policy, apply=apply)
    return experiment_record(e, bound=bound_record(bound, "the diagnosis of the run", "run-1", e))


@pytest.mark.parametrize("trials", [3, 5])
def test_runs_per_arm_are_the_runs_in_the_verdict(trials: int) -> None:
    x = _record(trials, _runner(100.0, 20.0))
    assert x.runs_in_verdict == x.runs_per_arm == len(x.pair_ratios) == trials
    assert len([t for t in x.trials if t.role == "patched" and t.in_verdict]) == trials


def test_an_arms_ms_per_step_times_its_samples_per_s_is_the_batch() -> None:
    """A baseline that stalls every 5th step: its time per step is the stalls' too, its typical step
    is not."""
    x = _record(3, _runner(100.0, 20.0, stall_every=5))
    arms = ((x.before_step_ms, x.before_samples_per_s), (x.after_step_ms, x.after_samples_per_s))
    for ms, rate in arms:
        assert ms is not None and rate is not None
        assert ms * rate / 1e3 == pytest.approx(BATCH, rel=1e-3)
    assert x.before_typical_ms is not None and x.before_step_ms is not None
    assert x.before_typical_ms == pytest.approx(100.0, rel=0.05)
    assert x.before_step_ms > 1.5 * x.before_typical_ms
    # one speed, two units
    assert x.speedup == pytest.approx(x.before_step_ms / x.after_step_ms, rel=0.02)


def test_a_gain_past_its_bound_says_why() -> None:
    # 5x measured against a 2.5x bound, the interval well above it
    x = _record(3, _runner(100.0, 20.0), BOUND)
    beyond = x.beyond_bound
    assert beyond is not None and beyond["bound"] == 2.5 and beyond["measured"] == x.speedup
    assert beyond["why"] == UNEXPLAINED  # the steps show no cause: the bound was wrong for this run
    assert x.bound is not None
    assert f"measured {x.speedup:.2f}× is above it: {UNEXPLAINED}" in x.bound.text
    assert x.to_json()["beyond_bound"] == beyond
    # stored, read back the same
    assert ExperimentRecord.from_json(x.to_json()).beyond_bound == beyond


def test_a_gain_past_its_bound_names_the_rest_of_the_step_when_the_steps_show_it() -> None:
    """The baseline's step without its drawing (100 − 40 = 60 ms) is longer than the patched step
    (20 ms)."""
    x = _record(3, _runner(100.0, 20.0, data_ms=40.0), BOUND)
    beyond = x.beyond_bound
    assert beyond is not None and "the rest of the step got faster too" in beyond["why"]


def test_a_gain_within_its_bound_is_not_flagged() -> None:
    x = _record(3, _runner(100.0, 50.0), BOUND)  # 2x against 2.5x
    assert x.beyond_bound is None and x.bound is not None and "above it" not in x.bound.text
