"""Shared test fixtures: where the real GPU traces live (../shared/traces beside the checkout); Hypothesis runs
derandomized, so the gate tests the same generated inputs every time (a new random find must not turn an
unrelated commit red). ``HYPOTHESIS_PROFILE=explore`` fuzzes with fresh randomness on each run.

Torch runs one intra-op thread in the test process (``STEPWISE_TEST_TORCH_THREADS`` changes it): the tests check
answers, not speed, and on this 2-core machine two threads spin against each other and against other jobs —
about half the CPU time with one (measured: benchmarks/results/test-lane-2026-11-23.md). Runs the tests start in subprocesses keep torch's default (the slow tests' margins
were measured with it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("gate", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "gate"))

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = (REPO.parent / "shared" / "traces").resolve()


def pytest_configure(config: pytest.Config) -> None:
    import torch

    torch.set_num_threads(int(os.environ.get("STEPWISE_TEST_TORCH_THREADS", "1")))


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    # CI always has ../shared beside the checkout: a missing folder is a failure, never a skip.
    assert SHARED_TRACES.is_dir(), f"expected the shared real traces at {SHARED_TRACES}"
    return SHARED_TRACES
