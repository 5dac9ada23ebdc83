"""Charts that read: no merged kernel bars, colours explained, evidence labelled, the straggler marked in a colour of
its own (which rank is marked: tests/profilers/jobs/test_straggler.py)."""

from __future__ import annotations

import pandas as pd

from reports import charts
from reports.charts.over_time import telemetry as telemetry_chart
from reports.evidence import NOT_RECORDED, evidence_label, evidence_value, format_evidence

PREFIX = (
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_bf16_128x128_32x3_nn_align8>::run_"
    + "x" * 40
)


def _kernels(names: list[str], classes: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {"name": names, "kclass": classes, "total_ns": [5e6 * (i + 1) for i in range(len(names))]}
    )


def test_two_long_kernels_with_a_common_prefix_are_two_bars() -> None:
    names = [PREFIX + "_variant_a", PREFIX + "_variant_b"]
    fig = charts.top_items(
        _kernels(names, ["matmul", "matmul"]), "Top GPU kernels", color_by="kclass"
    )
    ys = [y for trace in fig.data for y in trace.y]
    assert len(ys) == 2 and len(set(ys)) == 2
    hovers = " ".join(c.replace("<br>", "") for trace in fig.data for c in trace.customdata)
    assert "_variant_a" in hovers and "_variant_b" in hovers  # full names on hover


def test_colliding_short_labels_show_where_the_names_differ() -> None:
    base = "void at::native::vectorized_elementwise_kernel<4, at::native::{}<float>, at::detail::Array<char*, 3> >"
    labels = charts.distinct_labels(
        [base.format("CUDAFunctor_add"), base.format("BinaryFunctor_mul")], 60
    )
    assert "CUDAFunctor_add" in labels[0] and "BinaryFunctor_mul" in labels[1]
    same = charts.distinct_labels(
        ["k" * 200] * 3, 60
    )  # identical names (two ranks' copies): numbered
    assert len(set(same)) == 3 and same[1].endswith(" #2") and same[2].endswith(" #3")


def test_kernel_colours_are_explained_by_a_legend() -> None:
    fig = charts.top_items(
        _kernels(["gemm", "add", "nccl"], ["matmul", "elementwise", "communication"]),
        "t",
        color_by="kclass",
    )
    assert {t.name for t in fig.data} == {
        "matmul kernels",
        "elementwise kernels",
        "communication kernels",
    }
    assert all(t.showlegend for t in fig.data)
    assert {t.marker.color for t in fig.data} == {
        charts.KCLASS_COLORS[c] for c in ("matmul", "elementwise", "communication")
    }


def test_evidence_reads_as_labelled_values() -> None:
    rows = dict(
        format_evidence(
            {
                "gpu_busy_share": 0.5602,
                "step_time_ms": 12.3456,
                "peak_memory_mb": 2048.0,
                "reserved_gib": 13.2,
                "straggler_rank": 3,
                "syncs_per_step": 4.0,
                "cudnn_benchmark": False,
                "loader_mode": "workers",
                "median_wait_ms": None,
            }
        )
    )
    assert rows == {
        "GPU busy": "56.0%",
        "Step time": "12.35 ms",
        "Peak memory": "2,048 MiB",
        "Reserved": "13.20 GiB",
        "Straggler rank": "3",
        "Syncs per step": "4.0 per step",
        "cuDNN benchmark": "no",
        "Loader mode": "workers",
        "Median wait": NOT_RECORDED,
    }
    assert evidence_label("comm_overlap_fraction") == "Communication overlap fraction"
    assert evidence_value("comm_overlap_fraction", 0.25) == "25.0%"


def test_straggler_colour_is_no_category_colour_and_has_a_legend() -> None:
    per_rank = pd.DataFrame(
        {
            "rank": [0, 1, 2],
            "steps": 5,
            "step_ms": [10.0, 14.0, 10.0],
            "work_ms": [8.0, 13.0, 8.0],
            "exposed_comm_ms": [2.0, 1.0, 2.0],
        }
    )
    fig = charts.straggler(per_rank, 1)
    marked = [t for t in fig.data if t.name.startswith("straggler")]
    assert len(marked) == 1 and list(marked[0].x) == ["rank 1"]
    used = {
        *charts.CATEGORY_COLORS.values(),
        *charts.KCLASS_COLORS.values(),
        *charts.BOTTLENECK_COLORS.values(),
    }
    assert marked[0].marker.color not in used
    assert not [t for t in charts.straggler(per_rank, None).data if t.name.startswith("straggler")]


def test_telemetry_without_memory_metrics_draws_no_empty_memory_panel() -> None:
    t0 = 1_700_000_000 * 10**9
    tel = pd.DataFrame(
        {
            "t_unix_ns": [t0 + i * 10**8 for i in range(10)],
            "t_s": [i / 10 for i in range(10)],
            "source": "host",
            "cpu_pct": [50.0] * 10,
        }
    )
    steps = pd.DataFrame(
        {
            "rank": [0] * 150,
            "step": range(150),
            "wall_ms": [10.0] * 150,
            "loss": 1.0,
            "samples": 8.0,
            "profiled": False,
            "t_unix_ns": [t0 + i * 10**7 for i in range(150)],
        }
    )
    fig = telemetry_chart(tel, steps, "host")
    assert [a.text for a in fig.layout.annotations] == ["Utilisation (%)"]
    assert len(fig.layout.shapes) == 120  # step lines, capped, added in one layout update


def test_a_single_category_is_named_by_a_legend() -> None:
    """Issue 42: a single-category share bar had no legend (plotly hides it for one trace)."""
    from reports.charts.compare import breakdown_side_by_side

    per_step = pd.DataFrame(
        {"rank": [0, 0], "step": [0, 1], **{c: [0.0, 0.0] for c in charts.CATEGORIES}}
    )
    per_step["forward"] = [5e6, 6e6]
    figs = (
        charts.share_bar({"forward": 1.0}),
        charts.step_breakdown(per_step),
        charts.rank_breakdown(per_step),
        breakdown_side_by_side({"before": {"forward": 5.0}, "after": {"forward": 4.0}}),
    )
    for fig in figs:
        assert [t.name for t in fig.data] == [
            charts.category_name("forward")
        ] and fig.layout.showlegend is True
