"""The Perfetto export loses nothing Perfetto is for: counted in vs out, read back by a strict reader.

The whole trace keeps every event of every class (slices, instants, flows, metadata) and every ``args``; a window
keeps the slices overlapping it whole, the instants inside it and only flows whose ends both sit on kept slices.
Expected numbers are computed here from the input file with the standard library, not from the exporter."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from profilers.trace.load import load_trace
from reports.events.perfetto import chrome_trace_with_counts, count_events
from reports.events.window import event_index
from tests.trace_factory import step, write

GPU_TRACE = (
    "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"  # V100, 75,718 events, 9,096 flow pairs
)


def strict(body: bytes) -> list[dict[str, Any]]:
    """Parse as strict JSON (no NaN/Infinity) and check the Chrome trace schema of every event."""

    def refuse(name: str) -> Any:
        raise ValueError(f"non-standard JSON constant {name}")

    doc = json.loads(body, parse_constant=refuse)
    events = doc["traceEvents"]
    for e in events:
        assert isinstance(e.get("ph"), str) and isinstance(e.get("name"), str), e
        assert isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int), (
            e
        )  # Perfetto wants numbers
        if e["ph"] != "M":
            assert isinstance(e.get("ts"), (int, float)), e
        if e["ph"] == "X":
            assert isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, e
    flows: dict[Any, Counter[str]] = {}
    for e in events:
        if e["ph"] in "sf":
            flows.setdefault((e.get("cat"), e["id"]), Counter())[e["ph"]] += 1
    assert all(c["s"] >= 1 and c["f"] >= 1 for c in flows.values())  # no flow without both ends
    return events


def raw_events(path: Path) -> list[dict[str, Any]]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


@pytest.fixture(scope="module")
def gpu(shared_traces) -> tuple[Path, int]:
    path = shared_traces / GPU_TRACE
    return path, event_index(load_trace(path)).origin_ns


@pytest.mark.slow
def test_whole_trace_keeps_every_event_flow_instant_and_args(gpu) -> None:
    path, origin = gpu
    body, counts = chrome_trace_with_counts(path, origin)
    given = raw_events(path)
    by_ph = Counter(e["ph"] for e in given)
    assert by_ph["s"] == by_ph["f"] == 9096 and by_ph["i"] == 12840  # what the issue found dropped
    out = strict(body)
    assert Counter(e["ph"] for e in out) == by_ph + Counter({"M": counts.added})
    assert counts.given == count_events(given) and counts.lost() == {}
    assert counts.written["flow"] == 2 * 9096 and counts.written["instant"] == 12840
    assert sum(1 for e in out if e.get("args")) == counts.given["with_args"] + counts.added
    first = {
        (e["name"], e["ph"], json.dumps(e.get("args"), sort_keys=True))
        for e in given
        if e["ph"] != "M"
    }
    back = {
        (e["name"], e["ph"], json.dumps(e.get("args"), sort_keys=True))
        for e in out
        if e["ph"] != "M"
    }
    assert back == first  # every event's args came out as they went in


@pytest.mark.slow
def test_window_keeps_crossing_slices_whole_and_only_bound_flows(gpu) -> None:
    path, origin = gpu
    lo_us, hi_us = (
        100_000.0,
        130_000.0,
    )  # µs after the first step start: the GPU is busy (flows begin at 69 ms)
    body, counts = chrome_trace_with_counts(
        path, origin, origin + int(lo_us * 1e3), origin + int(hi_us * 1e3)
    )
    out = strict(body)
    base = origin / 1e3
    given = raw_events(path)
    expected_x = [
        e
        for e in given
        if e["ph"] == "X" and e["ts"] - base < hi_us and e["ts"] + e["dur"] - base > lo_us
    ]
    expected_i = [e for e in given if e["ph"] == "i" and lo_us <= e["ts"] - base < hi_us]
    slices = [e for e in out if e["ph"] == "X"]
    assert (
        len(slices) == len(expected_x) == counts.written["X"]
        and len(expected_x) < counts.given["X"]
    )
    crossing = [e for e in slices if e["ts"] < lo_us or e["ts"] + e["dur"] > hi_us]
    assert crossing  # events over the window's edges are there, with their full duration
    durs = {(e["name"], round(e["ts"] - base, 3)): e["dur"] for e in expected_x}
    assert all(durs[(e["name"], e["ts"])] == e["dur"] for e in crossing)
    assert sum(1 for e in out if e["ph"] == "i") == len(expected_i) == counts.written["instant"] > 0
    flows = [e for e in out if e["ph"] in "sf"]
    assert flows and len(flows) == counts.written["flow"] < counts.given["flow"]
    for e in flows:  # each end sits inside a kept slice of its own track
        assert any(
            s["pid"] == e["pid"]
            and s["tid"] == e["tid"]
            and s["ts"] <= e["ts"] <= s["ts"] + s["dur"]
            for s in slices
        ), e
    starts = {e["id"]: e["ts"] - base for e in given if e["ph"] == "s"}
    ends = {e["id"]: e["ts"] - base for e in given if e["ph"] == "f"}
    inside = {
        i
        for i, t in starts.items()
        if lo_us <= t < hi_us and i in ends and lo_us <= ends[i] < hi_us
    }
    assert inside and inside <= {
        e["id"] for e in flows if e["ph"] == "s"
    }  # a flow wholly inside is never dropped


def test_several_ranks_stay_apart(tmp_path) -> None:
    for rank in (0, 1):
        events = [
            step(1, 0, 1000),
            {
                "ph": "X",
                "name": "k",
                "cat": "kernel",
                "ts": 10,
                "dur": 5,
                "pid": 0,
                "tid": 7,
                "args": {"correlation": 5},
            },
            {
                "ph": "X",
                "name": "cudaLaunchKernel",
                "cat": "cuda_runtime",
                "ts": 5,
                "dur": 3,
                "pid": 1,
                "tid": 1,
                "args": {"correlation": 5},
            },
            {"ph": "s", "id": 5, "pid": 1, "tid": 1, "ts": 5, "cat": "ac2g", "name": "ac2g"},
            {
                "ph": "f",
                "id": 5,
                "pid": 0,
                "tid": 7,
                "ts": 10,
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            },
        ]
        write(tmp_path / f"rank{rank}.json", events)
    body, counts = chrome_trace_with_counts(tmp_path, 0)
    out = strict(body)
    assert counts.lost() == {}
    ids = {e["id"] for e in out if e["ph"] == "s"}
    assert len(ids) == 2  # the same flow id in two ranks is two flows
    labels = {e["args"]["labels"] for e in out if e["name"] == "process_labels"}
    assert labels == {"rank 0", "rank 1"}
    assert (
        len({e["pid"] for e in out if e["ph"] == "X"}) == 6
    )  # 3 processes (step, launch, GPU) × 2 ranks


def test_a_window_keeps_no_flow_end_without_its_start(tmp_path) -> None:
    """An ``f`` whose ``s`` the file lacks, bound to a long host slice crossing the window (what made 4,016 of a
    V100 window's 4,577 flow events orphans), stays out; a whole flow inside stays in."""
    events = [
        {
            "ph": "X",
            "name": "python <module>",
            "cat": "python_function",
            "ts": 0,
            "dur": 10_000,
            "pid": 1,
            "tid": 1,
        },
        {
            "ph": "X",
            "name": "cudaLaunchKernel",
            "cat": "cuda_runtime",
            "ts": 5_000,
            "dur": 3,
            "pid": 1,
            "tid": 1,
        },
        {"ph": "X", "name": "k", "cat": "kernel", "ts": 5_010, "dur": 5, "pid": 0, "tid": 7},
        {"ph": "s", "id": 5, "pid": 1, "tid": 1, "ts": 5_000, "cat": "ac2g", "name": "ac2g"},
        {
            "ph": "f",
            "id": 5,
            "pid": 0,
            "tid": 7,
            "ts": 5_010,
            "cat": "ac2g",
            "name": "ac2g",
            "bp": "e",
        },
        {
            "ph": "f",
            "id": 9,
            "pid": 1,
            "tid": 1,
            "ts": 200,
            "cat": "ac2g",
            "name": "ac2g",
            "bp": "e",
        },
    ]
    header = {
        "distributedInfo": {"rank": 3, "world_size": 8, "backend": "nccl"},
        "deviceProperties": [
            {"id": 0, "name": "Tesla V100-SXM2-16GB", "totalGlobalMem": 16 * 2**30}
        ],
    }
    path = write(tmp_path / "t.json", events, **header)
    body, _ = chrome_trace_with_counts(path, 0, 4_000_000, 6_000_000)
    flows = [(e["ph"], e["id"]) for e in strict(body) if e["ph"] in "sf"]
    assert sorted(flows) == [("f", 5), ("s", 5)]
    for doc in (
        json.loads(body),
        json.loads(chrome_trace_with_counts(path, 0)[0]),
    ):  # window and whole trace
        assert {k: doc[k] for k in header} == header


@pytest.mark.slow  # 17 s: a 216k-event trace exported twice
def test_both_exports_keep_the_traces_own_header(shared_traces) -> None:
    """``distributedInfo`` (HTA reads the rank from it) and ``deviceProperties`` survive the whole-trace and
    the window export; every ``f`` of the V100 window has its ``s``."""
    path = shared_traces / "communication/hta_v100_2rank_216k_events.json.gz"
    header = {
        k: v
        for k, v in json.loads(gzip.decompress(path.read_bytes())).items()
        if k != "traceEvents"
    }
    assert {"distributedInfo", "deviceProperties"} <= set(header)
    ev = load_trace(path).events
    origin, span = int(ev["start_ns"].min()), int(ev["end_ns"].max() - ev["start_ns"].min())
    for window in ((None, None), (origin + span // 3, origin + span // 3 + span // 20)):
        doc = json.loads(chrome_trace_with_counts(path, origin, *window)[0])
        for key, value in header.items():
            assert doc[key] == value, key
        if window[0] is not None:
            strict(
                json.dumps(doc).encode()
            )  # every flow with both ends (the whole file keeps its own orphans)


def test_several_ranks_keep_every_ranks_distributed_info(tmp_path) -> None:
    for rank in (0, 1):
        write(
            tmp_path / f"rank{rank}.json",
            [step(1, 0, 1000)],
            distributedInfo={"rank": rank, "world_size": 2, "backend": "nccl"},
            deviceProperties=[{"id": rank, "name": "NVIDIA A100-SXM4-80GB"}],
        )
    doc = json.loads(chrome_trace_with_counts(tmp_path, 0)[0])
    info = doc["distributedInfo"]
    assert (info["world_size"], info["backend"]) == (2, "nccl") and "rank" not in info
    assert {r: i["rank"] for r, i in info["ranks"].items()} == {"0": 0, "1": 1}
    assert doc["deviceProperties"][0]["name"] == "NVIDIA A100-SXM4-80GB"
