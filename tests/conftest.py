"""Shared test fixtures: where the real GPU traces live (../shared/traces beside the checkout); Hypothesis runs
derandomized, so the gate tests the same generated inputs every time (a new random find must not turn an
unrelated commit red). ``HYPOTHESIS_PROFILE=explore`` fuzzes with fresh randomness on each run.

Torch runs one intra-op thread in the test process (``STEPWISE_TEST_TORCH_THREADS`` changes it): the tests check
answers, not speed, and on this 2-core machine two threads spin against each other and against other jobs —
about half the CPU time with one (measured: benchmarks/results/test-lane-2026-11-23.md). Runs the tests start in subprocesses keep torch's default (the slow tests' margins
were measured with it).

Each real trace under ../shared/traces is parsed, and its breakdown computed, once per session
(:mod:`tests.trace_memo`); tests marked ``real_parse`` parse every load and compute every breakdown."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import settings

from tests.trace_memo import TraceMemo

# Fixtures kept in modules of their own, registered for every test here (pytest reads this only from the
# top-level conftest): a test names the fixture as a parameter and imports nothing.
pytest_plugins = ["tests.injector_fixture"]

settings.register_profile("gate", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "gate"))

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = (REPO.parent / "shared" / "traces").resolve()
_MEMO: list[TraceMemo] = []  # the session's memo, while installed


def pytest_configure(config: pytest.Config) -> None:
    # The suite's own environment, which every script it launches inherits as any user's would (Stepwise adds
    # nothing to it): OpenMP threads wait passively. On these 2 cores, shared with the test runner and a script's
    # DataLoader workers, spinning waits made every launched run many times slower (a small CNN's backward 6 ms
    # passive, 150 ms spinning beside one other job). A test about the setting itself sets its own.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    # Traces are read in this process unless a test is about the parallel reader (tests/profilers/
    # test_parallel_parse.py, the quick command line's test set STEPWISE_PARSE_WORKERS themselves): forking the
    # test process (torch loaded) for each streamed trace cost the fast lane ~7 s of system time.
    os.environ.setdefault("STEPWISE_PARSE_WORKERS", "0")
    # CPU calibrations (profilers.efficiency.calibrate) are cached per machine: the suite keeps its own cache, shared by
    # its runs (one decision for the whole session, as on a user's machine), and never writes the user's home
    if "STEPWISE_CALIBRATION_DIR" not in os.environ:
        import tempfile

        os.environ["STEPWISE_CALIBRATION_DIR"] = tempfile.mkdtemp(prefix="stepwise-calibration-")
    # a job's rank summaries likewise: a session cache, never the user's (a test that needs its own sets its own)
    if "STEPWISE_SUMMARY_CACHE" not in os.environ:
        import tempfile

        os.environ["STEPWISE_SUMMARY_CACHE"] = tempfile.mkdtemp(prefix="stepwise-summaries-")
    os.environ.setdefault(
        "STEPWISE_MAP_WORKERS", "1"
    )  # a job's rank summaries too (profilers.jobs.engines)
    # `-- python train.py` runs the python a shell would (PATH): as if this environment were activated
    bin_dir = os.path.dirname(sys.executable)
    if os.environ.get("PATH", "").split(os.pathsep)[0] != bin_dir:
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")

    from profilers.trace import breakdown, load

    torch.set_num_threads(int(os.environ.get("STEPWISE_TEST_TORCH_THREADS", "1")))
    # load_trace and every other reader call this module attribute, so replacing it covers them all; the
    # modules that import ``breakdown`` by name are imported after this (by the test modules).
    _MEMO.append(TraceMemo(SHARED_TRACES, load.load_trace_files, breakdown.breakdown))
    load.load_trace_files = _MEMO[0].load
    breakdown.breakdown = _MEMO[0].breakdown


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A timed test is a slow one: the fast lane never runs it, whatever else selects it.
    for item in items:
        if item.get_closest_marker("timed") is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)


def pytest_collection_finish(session: pytest.Session) -> None:
    # Collection imported torch, pandas, Streamlit, plotly...: millions of long-lived objects that every full
    # cyclic-GC pass would walk again. Frozen, the passes during the tests look only at what the tests make.
    gc.collect()
    gc.freeze()


def pytest_unconfigure(config: pytest.Config) -> None:
    from profilers.trace import breakdown, load

    if _MEMO:
        memo = _MEMO.pop()
        load.load_trace_files, breakdown.breakdown = memo.parse, memo.compute


@pytest.fixture(autouse=True)
def _real_parse_when_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests marked ``real_parse`` (the loader's own) parse every trace they load, shared ones included, and
    compute every breakdown."""
    memo = _MEMO[0] if _MEMO else None
    if memo is None or request.node.get_closest_marker("real_parse") is None:
        yield
        return
    memo.bypass = True
    try:
        yield
    finally:
        memo.bypass = False


@pytest.fixture()
def trace_memo() -> TraceMemo:
    """The session's shared-trace memo (for the tests of the memo itself)."""
    assert _MEMO, "the trace memo is installed in pytest_configure"
    return _MEMO[0]


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    # CI always has ../shared beside the checkout: a missing folder is a failure, never a skip.
    assert SHARED_TRACES.is_dir(), f"expected the shared real traces at {SHARED_TRACES}"
    return SHARED_TRACES


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-references",
        action="store_true",
        default=False,
        help="rewrite tests/references/analyze/*.json from today's code (on purpose only)",
    )


@pytest.fixture(scope="session")
def update_references(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-references"))
