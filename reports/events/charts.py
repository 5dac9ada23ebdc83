"""Charts of the event-level view: a window of the timeline, the events of a small window one by one, and a
memory snapshot's allocated memory over time. Inputs are the small frames of :mod:`reports.events.window` and
:mod:`profilers.trace.snapshot_history`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from profilers.trace.snapshot_history import SnapshotHistory
from reports.charts import CATEGORY_COLORS, SERIES_COLORS, hover_text, label, style
from profilers.trace.breakdown import CATEGORIES
from reports.charts import category_name
from reports.charts.over_time import step_lines

#: One colour per event kind, taken from the category each kind mostly feeds.
KIND_COLORS = {
    "kernel": CATEGORY_COLORS["gpu_compute"],
    "memcpy": CATEGORY_COLORS["gpu_memcpy"],
    "memset": CATEGORY_COLORS["gpu_memset"],
    "runtime": CATEGORY_COLORS["host_runtime"],
    "cpu_op": CATEGORY_COLORS["forward"],
    "user_annotation": "#9D755D",
    "gpu_annotation": "#D8B5A5",
    "python_function": "#BAB0AC",
    "other": "#79706E",
}


def window(
    tl: pd.DataFrame, spans: pd.DataFrame, rank: int, start_ms: float, end_ms: float
) -> go.Figure:
    """The category timeline of one window as stacked step areas (one path per category: a browser draws ten
    paths far faster than 400 × 10 bars); drag a box over it to zoom (the page re-buckets that window)."""
    df = tl[tl["rank"] == rank]
    fig = go.Figure()
    width = df["width_ms"].where(df["width_ms"] > 0, 1)
    x = df["t_ms"].round(6).tolist()
    for cat in CATEGORIES:
        if cat in df and float(df[cat].sum()) > 0:
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=(100 * df[cat] / width).round(2).tolist(),
                    name=category_name(cat),
                    mode="lines",
                    stackgroup="share",
                    line={"width": 0, "shape": "hv"},
                    fillcolor=CATEGORY_COLORS[cat],
                    marker_color=CATEGORY_COLORS[cat],
                    hovertemplate=f"t=%{{x:.3f}} ms<br>{category_name(cat)}: %{{y:.0f}}%<extra></extra>",
                )
            )
    inside = spans[
        (spans["rank"] == rank) & (spans["start_ms"] >= start_ms) & (spans["start_ms"] <= end_ms)
    ]
    step_lines(fig, inside["start_ms"].tolist())
    fig.update_xaxes(range=[start_ms, end_ms])
    fig.update_yaxes(range=[0, 100], ticksuffix="%")
    fig.update_layout(dragmode="select", selectdirection="h", hovermode="x")
    w = float(df["width_ms"].iloc[0]) if len(df) else 0.0
    return style(
        fig,
        f"Timeline of rank {rank} ({len(df)} buckets of {w:.3g} ms; dotted lines: step starts)",
        height=340,
        y_title="share of bucket",
        x_title="ms since the first step",
    )


def events(ev: pd.DataFrame, start_ms: float, end_ms: float) -> go.Figure:
    """Each event of a small window as a bar on its lane, coloured by kind: a host thread's nested ops on depth
    lanes (an op inside an op one row lower, as Perfetto draws them), a GPU stream's events by kind."""
    fig = go.Figure()
    host = ev["lane"].str.startswith("host")
    row = np.where(
        host, ev["lane"] + " · depth " + ev["depth"].astype(str), ev["lane"] + " · " + ev["kind"]
    )
    ev = ev.assign(base=ev["lane"], lane=row, order=np.where(host, 0, 1)).sort_values(
        ["order", "base", "depth"], kind="stable"
    )
    for kind, g in ev.groupby("kind", sort=True):
        fig.add_trace(
            go.Bar(
                y=[label(x, 50) for x in g["lane"]],
                x=g["dur_ms"].clip(lower=(end_ms - start_ms) / 2000).round(6).tolist(),
                base=g["start_ms"].round(6).tolist(),
                orientation="h",
                name=str(kind),
                marker_color=KIND_COLORS.get(str(kind), KIND_COLORS["other"]),
                marker_line_width=0,
                opacity=0.8,
                customdata=[[hover_text(n), round(d, 4)] for n, d in zip(g["name"], g["dur_ms"])],
                hovertemplate="%{customdata[0]}<br>start %{base:.3f} ms · %{customdata[1]} ms<extra></extra>",
            )
        )
    lanes = ev["lane"].nunique()
    fig.update_layout(barmode="overlay", legend={"title": {"text": "colour = event kind"}})
    fig.update_xaxes(range=[start_ms, end_ms])
    fig.update_yaxes(
        type="category",
        autorange="reversed",
        categoryorder="array",
        categoryarray=[label(x, 50) for x in dict.fromkeys(ev["lane"])],
    )
    return style(
        fig,
        f"{len(ev):,} events of this window, one bar each (hover for the full name)",
        height=max(260, 30 * lanes + 120),
        x_title="ms since the first step",
    )


def snapshot_curve(h: SnapshotHistory, device_memory_bytes: int | None = None) -> go.Figure:
    """Allocated memory (MiB) over the snapshot's recorded history, per device, against the device total."""
    fig = go.Figure()
    for i, (device, g) in enumerate(h.curve.groupby("device", sort=True)):
        fig.add_trace(
            go.Scatter(
                x=g["t_ms"].round(3).tolist(),
                y=g["allocated_mib"].round(1).tolist(),
                mode="lines",
                name=f"device {device} allocated",
                line={"color": SERIES_COLORS[i % len(SERIES_COLORS)], "shape": "hv"},
            )
        )
    if device_memory_bytes:
        fig.add_hline(
            y=device_memory_bytes / 1024**2,
            line_dash="dash",
            line_color="#E45756",
            annotation_text="device total",
            annotation_position="top left",
        )
    x_title = (
        "ms since the first recorded event"
        if h.timed
        else "allocator event (the snapshot has no times)"
    )
    return style(
        fig,
        "Allocated memory over the recorded history",
        height=340,
        y_title="MiB",
        x_title=x_title,
    )
