"""The tests' shared-trace memo (tests/trace_memo.py): a memoised load is the trace a fresh parse gives, each
caller's copy is its own, and only the read-only shared folder is memoised."""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path

import pandas as pd
import pytest

from profilers.trace.events import Trace
from profilers.trace.load import load_trace
from profilers.trace.sources import find_trace_files
from tests.trace_factory import step, write, x
from tests.trace_memo import TraceMemo

SHARED = ["compute/kineto_resnet50_num_workers_4.pt.trace.json.gz", "communication/param_dlrm_8_ranks"]


def fresh(memo: TraceMemo, path: Path) -> Trace:
    return memo.parse(find_trace_files(path), str(path))


def assert_same_trace(got: Trace, want: Trace) -> None:
    for f in fields(Trace):
        a, b = getattr(got, f.name), getattr(want, f.name)
        if isinstance(b, pd.DataFrame):
            pd.testing.assert_frame_equal(a, b, check_exact=True)
        else:
            assert a == b, f.name


@pytest.mark.parametrize("rel", SHARED)
def test_a_memoised_load_equals_a_fresh_parse(rel: str, shared_traces: Path, trace_memo: TraceMemo):
    path = shared_traces / rel
    first, second = load_trace(path), load_trace(path)
    assert trace_memo.key(find_trace_files(path), str(path)) in trace_memo.traces
    assert first is not second and first.events is not second.events
    want = fresh(trace_memo, path)
    assert_same_trace(first, want)
    assert_same_trace(second, want)


def test_the_source_is_the_callers_path(shared_traces: Path, trace_memo: TraceMemo):
    path = shared_traces / SHARED[0]
    relative = os.path.relpath(path)
    assert load_trace(path).source == str(path)
    assert load_trace(relative).source == relative


def test_a_change_to_ones_copy_reaches_no_other(shared_traces: Path, trace_memo: TraceMemo):
    path = shared_traces / SHARED[0]
    mine = load_trace(path)
    mine.events.loc[0, "dur_ns"] = -1
    mine.events["extra"] = 1
    mine.steps.loc[:, "end_ns"] = 0
    mine.memory["bytes"] = 0
    assert_same_trace(load_trace(path), fresh(trace_memo, path))


def test_other_paths_are_parsed_on_every_load(tmp_path: Path, trace_memo: TraceMemo):
    p = write(tmp_path / "t.json", [step(1, 0, 100), x("aten::mm", 5, 10)])
    before = dict(trace_memo.traces)
    assert load_trace(p).n_events == 2
    write(p, [step(1, 0, 100), x("aten::mm", 5, 10), x("aten::add", 20, 10)])
    assert load_trace(p).n_events == 3
    assert trace_memo.traces == before


@pytest.mark.real_parse
def test_real_parse_tests_bypass_the_memo(shared_traces: Path, trace_memo: TraceMemo):
    path = shared_traces / "edge/hta_no_rank_info.json.gz"
    hits, kept = trace_memo.hits, dict(trace_memo.traces)
    assert load_trace(path).ranks == (0,)
    assert load_trace(path).ranks == (0,)
    assert (trace_memo.hits, trace_memo.traces) == (hits, kept)
