"""The Ray engine reads a job's rank files on a (local) Ray cluster and gives the local engine's answer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli.advisors import analyze
from profilers.jobs.engines import map_summaries
from profilers.trace.sources import find_trace_files

ray = pytest.importorskip("ray")
JOB = (
    Path(__file__).resolve().parents[3].parent
    / "shared"
    / "traces"
    / "communication"
    / "param_dlrm_8_ranks"
)


@pytest.mark.slow
def test_ray_gives_the_local_engines_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", "off")
    local = analyze(str(JOB))
    # A cluster of this machine alone: 2 CPUs, no dashboard, nothing beyond localhost.
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={
            "env_vars": {
                "STEPWISE_SUMMARY_CACHE": "off",
                "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
            }
        },
    )
    try:
        on_ray = analyze(str(JOB), engine="ray")
        summaries = map_summaries(find_trace_files(JOB), "ray")
    finally:
        ray.shutdown()
    assert on_ray["job"].pop("engine") == "ray"
    assert local["job"].pop("engine") == "local"
    assert on_ray == local
    assert all(
        s["worker"]["pid"] != os.getpid() for s in summaries
    )  # each rank read in a Ray worker
