"""The realistic workloads (no single designed bottleneck) run end to end as scripts under the launcher at tiny
size and leave a trace the engine breaks down, dominated by the model's compute (the designed ones are covered by
tests/advisors/experiments/test_real_runs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.workloads import workload_spec
from profilers.run.handle import follow
from profilers.run.launch import start_script
from profilers.store.runs import RunStore
from tests.sample_runs.dominant import REALISTIC, assert_dominated_by, expected_group, run_breakdown

MARGIN = 1.3  # the measured shares are in dominant.py, beside REALISTIC_DOMINANT


@pytest.mark.slow
@pytest.mark.timed
@pytest.mark.parametrize(
    "name", REALISTIC
)  # every registered workload without a designed bottleneck
def test_runs_ok_and_its_trace_is_dominated_by_its_compute(name: str, tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    handle = start_script(workload_spec(store.root, name), store, label=name)
    result = follow(handle, timeout_s=300)
    assert result.status.value == "ok", result.error
    steps = store.read_steps(handle.run_id)
    assert len(steps) == result.steps_done > 0 and steps["loss"].notna().all()
    b = run_breakdown(store.path(handle.run_id))
    busy = b.share("forward") + b.share("backward") + b.share("optimizer") + b.share("dataloader")
    assert busy > 0.5  # a training step, not idle time
    assert_dominated_by(b, expected_group(name), MARGIN)  # checks device, steps and markers too
