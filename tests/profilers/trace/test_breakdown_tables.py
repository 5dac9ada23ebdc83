"""The breakdown's kernel and op tables, made from name codes, are the pandas groupby they replaced, row for row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from profilers.trace import breakdown_parts as parts
from profilers.trace.load import load_trace


def _reference(ev: pd.DataFrame, sel: np.ndarray) -> pd.DataFrame:
    g = (
        ev.loc[sel, ["name", "dur_ns"]]
        .groupby("name", observed=True)["dur_ns"]
        .agg(["count", "sum"])
        .reset_index()
    )
    g = g.rename(columns={"sum": "total_ns"})
    g["name"] = g["name"].astype(str)
    return g


@pytest.mark.parametrize(
    "name",
    [
        "compute/kineto_resnet50_num_workers_4.pt.trace.json.gz",
        "edge/hta_cpu_only_gloo_rank-34.pt.trace.json.gz",
    ],
)
def test_name_totals_are_the_groupby(name: str, shared_traces: Path) -> None:
    ev = load_trace(shared_traces / name).events
    in_step = ev["step"].to_numpy() >= 0
    for sel in (
        parts._kind(ev, "kernel") & in_step,
        parts._kind(ev, "cpu_op") & in_step,
        np.zeros(len(ev), bool),
    ):
        if not sel.any():
            continue
        pd.testing.assert_frame_equal(parts._name_totals(ev, sel), _reference(ev, sel))
    ops = parts.op_table(ev, in_step)
    assert (
        list(ops.columns) == ["name", "count", "total_ns", "mean_us"]
        and ops["total_ns"].is_monotonic_decreasing
    )
    kernels = parts.kernel_table(ev, in_step)
    assert list(kernels.columns) == [
        "name",
        "kclass",
        "count",
        "total_ns",
        "mean_us",
        "low_precision",
    ]
