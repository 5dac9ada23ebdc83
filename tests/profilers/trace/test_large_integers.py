"""Ids beyond 2**53 (where float64 stops telling neighbours apart) are read as exact integers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profilers.trace.load import load_trace
from tests.trace_factory import kernel, step, write, x

BIG = 2**53  # float64(BIG + 1) == float64(BIG)


@pytest.mark.parametrize("typed", [True, False], ids=["typed_events", "dict_events"])
def test_kernels_link_to_their_launch_beyond_2_53(tmp_path: Path, typed: bool):
    events = [step(1, 0, 100), step(2, 100, 100), step(3, 200, 100)]
    for n, corr in ((1, BIG), (2, BIG + 1), (3, BIG + 2)):
        events.append(x("cudaLaunchKernel", 100 * n - 90, 5, cat="cuda_runtime", correlation=corr))
    # The kernels run after every CPU step has ended: only the launch link gives them a step.
    events += [
        kernel("sgemm_a", 400, 10, correlation=BIG + 1),
        kernel("sgemm_b", 420, 10, correlation=BIG + 2),
    ]
    if not typed:  # an event the typed decoder refuses sends the document down the orjson-dict path
        events.append({"ph": "i", "name": "marker", "ts": 1, "args": 5})
    ev = load_trace(write(tmp_path / "t.json", events)).events
    kernels = ev[ev["kind"] == "kernel"].set_index(
        ev.loc[ev["kind"] == "kernel", "name"].astype(str)
    )
    assert kernels.loc["sgemm_a", "correlation"] == BIG + 1
    assert kernels.loc["sgemm_b", "correlation"] == BIG + 2
    assert kernels.loc["sgemm_a", "step"] == 2 and kernels.loc["sgemm_b", "step"] == 3


def test_ids_mixed_with_floats_and_beyond_int64(tmp_path: Path):
    """A float anywhere in a column makes numpy read it as float64: the ids must still come out exact,
    and an id no int64 can hold is 'absent' (-1), not a wrapped number."""
    events = [
        step(1, 0, 100),
        kernel("k_float", 10, 5, correlation=7.0),
        kernel("k_big", 20, 5, correlation=BIG + 1),
        kernel("k_huge", 30, 5, correlation=2**64 + 3),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))  # orjson refuses ints beyond 64 bits
    ev = load_trace(path).events
    corr = dict(zip(ev["name"].astype(str), ev["correlation"]))
    assert corr["k_float"] == 7 and corr["k_big"] == BIG + 1 and corr["k_huge"] == -1
