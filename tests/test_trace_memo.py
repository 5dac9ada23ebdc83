"""The tests' shared-trace memo (tests/trace_memo.py): a memoised load is the trace a fresh parse gives and a
memoised breakdown the one computed afresh, each caller's copy is its own, a copy a test changed gets its own
breakdown, and only the read-only shared folder is memoised."""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path

import pandas as pd
import pytest

from profilers.trace.breakdown import Breakdown, breakdown
from profilers.trace.events import Trace
from profilers.trace.load import load_trace
from profilers.trace.sources import find_trace_files
from tests.trace_factory import step, write, x
from tests.trace_memo import TraceMemo

SHARED = [
    "host/tracelens_h100_bert-small.json.gz",
    "communication/param_dlrm_8_ranks",
]  # small: parsed afresh here


def fresh(memo: TraceMemo, path: Path) -> Trace:
    return memo.parse(find_trace_files(path), str(path))


def assert_same(got: Trace | Breakdown, want: Trace | Breakdown) -> None:
    for f in fields(want):
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
    assert_same(first, want)
    assert_same(second, want)


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
    assert_same(load_trace(path), fresh(trace_memo, path))


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
    hits, kept, computed = trace_memo.hits, dict(trace_memo.traces), dict(trace_memo.breakdowns)
    assert load_trace(path).ranks == (0,)
    assert breakdown(load_trace(path)).ranks == (0,)
    assert (trace_memo.hits, trace_memo.traces, trace_memo.breakdowns) == (hits, kept, computed)


@pytest.mark.parametrize("rel", SHARED)
def test_a_memoised_breakdown_equals_a_fresh_one(
    rel: str, shared_traces: Path, trace_memo: TraceMemo
):
    path = shared_traces / rel
    first, second = breakdown(load_trace(path)), breakdown(load_trace(path))
    assert trace_memo.key(find_trace_files(path), str(path)) in trace_memo.breakdowns
    assert first is not second and first.per_step is not second.per_step
    want = trace_memo.compute(fresh(trace_memo, path))
    assert_same(first, want)
    assert_same(second, want)


def test_a_changed_copy_gets_its_own_breakdown(shared_traces: Path, trace_memo: TraceMemo):
    path = shared_traces / SHARED[0]
    mine = load_trace(path)
    want = trace_memo.compute(mine)
    assert_same(breakdown(mine), want)
    kernels = mine.events["kind"] == "kernel"
    mine.events.loc[kernels, "end_ns"] = mine.events.loc[kernels, "start_ns"]
    changed = breakdown(mine)
    assert changed.gpu_busy_ns < want.gpu_busy_ns
    assert_same(changed, trace_memo.compute(mine))
    outside = load_trace(path)
    outside.events["step"] = -1  # a whole column replaced: no event inside a step
    assert breakdown(outside).kernels.empty and not want.kernels.empty
    assert_same(breakdown(outside), trace_memo.compute(outside))
    assert_same(breakdown(load_trace(path)), want)


def test_a_change_to_ones_breakdown_reaches_no_other(shared_traces: Path, trace_memo: TraceMemo):
    path = shared_traces / SHARED[0]
    mine = breakdown(load_trace(path))
    mine.per_step["step_ns"] = 0
    mine.kernel_class_ns.clear()
    assert_same(breakdown(load_trace(path)), trace_memo.compute(fresh(trace_memo, path)))


def test_a_byte_for_byte_copy_is_the_shared_trace_an_edited_one_is_parsed(
    shared_traces: Path, tmp_path: Path, trace_memo: TraceMemo
):
    src = shared_traces / "edge/kineto_old_schema_gpu_metrics.json"
    copy = tmp_path / src.name
    copy.write_bytes(src.read_bytes())
    assert trace_memo.key(find_trace_files(copy), str(copy)) == trace_memo.key(
        find_trace_files(src), str(src)
    )
    hits = trace_memo.hits
    load_trace(src)
    mine = load_trace(copy)
    assert trace_memo.hits > hits and mine.source == str(copy)
    assert_same(mine, fresh(trace_memo, copy))
    copy.write_bytes(src.read_bytes() + b"\n")
    assert trace_memo.key(find_trace_files(copy), str(copy)) is None
    hits = trace_memo.hits
    assert_same(load_trace(copy), fresh(trace_memo, copy))
    assert trace_memo.hits == hits
