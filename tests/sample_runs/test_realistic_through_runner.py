"""The realistic workloads (no single designed bottleneck) run end to end through the runner at tiny size and
leave a trace the engine breaks down, dominated by the model's compute (the designed ones are covered by
tests/advisors/test_real_runs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profilers.run import runner
from profilers.store.runs import RunStore
from sample_runs import WORKLOADS
from tests.sample_runs.dominant import assert_dominated_by, run_breakdown

# forward+backward vs the runner-up ("other": Python between ops), measured per workload in
# benchmarks/results/workload-shares-2026-11.md.
EXPECTED = {"resnet_small": "compute", "gpt_small": "compute", "digits": "compute"}
MARGIN = 1.3


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_runs_ok_and_its_trace_is_dominated_by_its_compute(name: str, tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    handle = runner.start(WORKLOADS[name].spec("tiny"), store)
    result = runner.follow(handle, timeout_s=300)
    assert result.status.value == "ok", result.error
    steps = store.read_steps(handle.run_id)
    assert len(steps) == result.steps_done > 0 and steps["loss"].notna().all()
    b = run_breakdown(store.path(handle.run_id))
    busy = b.share("forward") + b.share("backward") + b.share("optimizer") + b.share("dataloader")
    assert busy > 0.5  # a training step, not idle time
    assert_dominated_by(b, EXPECTED[name], MARGIN)  # checks device, steps and markers too
