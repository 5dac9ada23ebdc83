"""How many DataLoader workers a trial measures: from the run's own numbers."""

from __future__ import annotations

from advisors.fixes import spec_of
from advisors.fixes.context import ScriptContext
from advisors.fixes.data.workers import next_worker_count


def test_worker_count_follows_the_runs_numbers() -> None:
    idle = ScriptContext(cores=2, host_busy=0.3, loader={"num_workers": 0})
    assert next_worker_count(idle) == 4  # latency-bound loading: more workers than cores
    assert next_worker_count(ScriptContext(cores=2, host_busy=None, loader={"num_workers": 0})) == 2
    assert (
        next_worker_count(ScriptContext(cores=2, host_busy=0.5, loader={"num_workers": 4})) == 8
    )  # climb, measured
    assert (
        next_worker_count(ScriptContext(cores=2, host_busy=0.5, loader={"num_workers": 8})) is None
    )  # 4 per core
    saturated = ScriptContext(cores=2, host_busy=0.95, loader={"num_workers": 2})
    assert (
        next_worker_count(saturated) is None
    )  # more workers cannot help: caching is tried instead
    assert (
        next_worker_count(ScriptContext(cores=2, host_busy=0.95, loader={"num_workers": 6})) == 2
    )  # fewer
    injection = spec_of("dataloader_workers").injection
    assert injection is not None and injection.knobs(saturated) is None
