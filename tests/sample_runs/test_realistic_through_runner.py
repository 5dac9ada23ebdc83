"""The realistic workloads (no single designed bottleneck) run end to end through the runner at tiny size and
leave a trace the engine breaks down (the designed ones are covered by tests/advisors/test_real_runs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profilers import runner
from profilers.breakdown import breakdown
from profilers.store import RunStore
from profilers.trace_load import load_trace
from sample_runs import WORKLOADS


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet_small", "gpt_small", "digits"])
def test_runs_ok_and_its_trace_breaks_down(name: str, tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    handle = runner.start(WORKLOADS[name].spec("tiny"), store)
    result = runner.follow(handle, timeout_s=300)
    assert result.status.value == "ok", result.error
    steps = store.read_steps(handle.run_id)
    assert len(steps) == result.steps_done > 0 and steps["loss"].notna().all()
    b = breakdown(load_trace(store.path(handle.run_id)))
    assert b.device == "cpu" and b.n_steps >= 1 and not b.steps_inferred
    busy = b.share("forward") + b.share("backward") + b.share("optimizer") + b.share("dataloader")
    assert busy > 0.5  # a training step, not idle time
