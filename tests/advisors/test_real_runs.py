"""Real tiny workloads through the real runner: each is diagnosed as the bottleneck it was built to have.

Slow (one subprocess run per workload, ~20 s each on 2 cores) but few; they exercise ``store_runner``,
``measured_trial`` on a real ``steps.jsonl`` and ``analyze`` on real run folders (with and without a trace).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisors.facts import derive
from advisors.optimize import diagnose_outcome, observe
from advisors.trials import store_runner
from profilers.store import RunStore
from sample_runs import WORKLOADS

EXPECTED = {"data_bound": "data", "compute_bound": "compute", "memory_bound": "memory",
            "communication_bound": "communication"}


def _facts(outcome) -> dict:
    """The facts the rules saw, so a failure in CI says why without a re-run."""
    f = derive(observe(Path(outcome.run_dir)))
    return {k: v for k, v in vars(f).items() if isinstance(v, (int, float, str, type(None)))}


@pytest.mark.slow
@pytest.mark.parametrize("workload", sorted(EXPECTED))
def test_tiny_workload_is_diagnosed_as_built(workload: str, tmp_path: Path) -> None:
    run = store_runner(RunStore(tmp_path / "runs"), timeout_s=300)
    outcome = run(WORKLOADS[workload].spec("tiny"))
    d = diagnose_outcome(outcome)
    why = {"findings": [(f.rule, round(f.severity, 3)) for f in d.findings], "facts": _facts(outcome)}
    assert d.bottleneck.value == EXPECTED[workload], why
    if outcome.status == "ok":
        assert outcome.trial is not None and outcome.trial.samples_per_step > 0
        assert len(outcome.losses) == outcome.steps_done
    else:
        assert outcome.status == "out_of_memory" and d.binding is not None
        assert d.binding.evidence["peak_memory_mb"] is not None
