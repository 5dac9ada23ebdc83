"""The event view's data: windows re-bucket consistently with the breakdown, small windows list their events,
the Perfetto export is a valid Chrome trace of exactly the window; a snapshot's history ends where the dump is."""

from __future__ import annotations

import gzip

import orjson
import pytest

from profilers.trace.breakdown import CATEGORIES, breakdown
from profilers.trace.load import load_trace
from profilers.trace.memory_snapshot import load_memory_snapshot, read_snapshot_document
from profilers.trace.snapshot_history import snapshot_history
from reports.events.window import clamp_window, event_index, window_events, window_timeline
from reports.events.perfetto import chrome_trace, perfetto_gzip

DATA_TRACE = "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"


@pytest.fixture(scope="module")
def loaded(shared_traces):
    trace = load_trace(shared_traces / DATA_TRACE)
    return trace, event_index(trace)


def test_whole_window_adds_up_to_the_breakdown(loaded) -> None:
    trace, index = loaded
    rank = index.ranks[0]
    tl = window_timeline(index, rank, 0, index.span_ms, buckets=400)
    per_step = breakdown(trace).per_step
    for cat in CATEGORIES:
        assert tl[cat].sum() == pytest.approx(per_step[cat].sum() / 1e6, rel=1e-6, abs=1e-6)


def test_zoomed_window_is_rebucketed_finer_and_agrees(loaded) -> None:
    _, index = loaded
    rank = index.ranks[0]
    whole = window_timeline(index, rank, 0, index.span_ms, buckets=100)
    lo, hi = float(whole["t_ms"].iloc[10]), float(whole["t_ms"].iloc[12])
    zoom = window_timeline(index, rank, lo, hi, buckets=100)
    assert len(zoom) == 100 and zoom["width_ms"].max() < whole["width_ms"].min() / 10
    for cat in CATEGORIES:  # the two coarse buckets hold what the 100 fine ones hold
        assert zoom[cat].sum() == pytest.approx(whole[cat].iloc[10:12].sum(), abs=1e-3)


def test_clamp_window_handles_reversed_and_outside_inputs(loaded) -> None:
    _, index = loaded
    assert clamp_window(index, 50, 10) == (10, 50)
    lo, hi = clamp_window(index, -5, 10 * index.span_ms)
    assert (lo, hi) == (0.0, index.span_ms)
    lo, hi = clamp_window(index, 7, 7)
    assert hi - lo == pytest.approx(1e-3)


def test_small_window_lists_its_events_and_a_large_one_does_not(loaded) -> None:
    trace, index = loaded
    rank = index.ranks[0]
    none, n_all = window_events(trace, index, rank, 0, index.span_ms)
    assert none is None and n_all > 1500
    ev, n = window_events(trace, index, rank, 20.0, 20.5)
    assert ev is not None and 0 < n == len(ev) <= 1500
    assert ((ev["start_ms"] < 20.5) & (ev["start_ms"] + ev["dur_ms"] > 20.0)).all()


@pytest.mark.slow
def test_perfetto_export_of_a_window_is_a_valid_chrome_trace(
    loaded, tmp_path, shared_traces
) -> None:
    trace, index = loaded
    lo, hi = index.origin_ns + 20_000_000, index.origin_ns + 20_500_000
    blob = perfetto_gzip(shared_traces / DATA_TRACE, index.origin_ns, lo, hi)
    doc = orjson.loads(gzip.decompress(blob))
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert spans and all(e["ts"] < 20_500 and e["ts"] + e["dur"] > 20_000 for e in spans)
    assert {"process_name", "thread_name", "process_labels"} <= {
        e["name"] for e in doc["traceEvents"] if e["ph"] == "M"
    }
    path = tmp_path / "window.json.gz"
    path.write_bytes(blob)
    assert load_trace(path).n_events == len(spans)  # our own strict reader takes it back
    assert len(
        orjson.loads(chrome_trace(shared_traces / DATA_TRACE, index.origin_ns))["traceEvents"]
    ) > len(doc["traceEvents"])


def test_snapshot_history_peaks_where_the_replay_does(shared_traces) -> None:
    path = shared_traces / "memory/cs336_memory_snapshot.pickle"
    h = snapshot_history(read_snapshot_document(path), max_points=300)
    summary = load_memory_snapshot(path)
    assert h.timed and len(h.curve) <= 301
    assert h.peak_bytes == summary.peak_allocated_bytes
    assert h.curve["allocated_mib"].max() == pytest.approx(summary.peak_allocated_bytes / 1024**2)
    assert h.curve["allocated_mib"].iloc[-1] == pytest.approx(summary.allocated_bytes / 1024**2)
    top = h.top_stacks[0]
    assert top.where == "model.py:39 forward" and top.frames[0].endswith("(library)")
    assert sum(s.bytes for s in h.top_stacks) <= h.peak_bytes
    # one number per allocation site: the Events page's sites are the Analysis page's, byte for byte
    assert [(s.where, s.bytes, s.count) for s in h.top_stacks] == [
        (t.where, t.bytes, t.count) for t in summary.top_sites
    ]


def test_nested_host_ops_get_depth_lanes() -> None:
    import numpy as np

    from reports.events.window import nesting_depth

    # thread 1: a [0, 100) holds b [10, 50) which holds c [20, 30); d [60, 90) is b's sibling; thread 2: e alone;
    # a GPU stream's overlapping events stay on depth 0
    lane = np.array(["t1", "t1", "t1", "t1", "t2", "gpu", "gpu"])
    start = np.array([0, 10, 20, 60, 15, 0, 5])
    end = np.array([100, 50, 30, 90, 40, 50, 40])
    nested = np.array([True] * 5 + [False] * 2)
    assert nesting_depth(lane, start, end, nested).tolist() == [0, 1, 2, 1, 0, 0, 0]


def test_small_window_events_carry_their_depth(loaded) -> None:
    trace, index = loaded
    ev, _ = window_events(trace, index, index.ranks[0], 20.0, 20.5)
    assert ev is not None and ev["depth"].max() >= 1  # host ops inside host ops
    assert (ev.loc[~ev["lane"].str.startswith("host"), "depth"] == 0).all()
