"""Shared test fixtures: where the real GPU traces live (../shared/traces beside the checkout)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = (REPO.parent / "shared" / "traces").resolve()


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    # CI always has ../shared beside the checkout: a missing folder is a failure, never a skip.
    assert SHARED_TRACES.is_dir(), f"expected the shared real traces at {SHARED_TRACES}"
    return SHARED_TRACES
