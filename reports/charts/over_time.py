"""Charts over time: the downsampled category timeline, memory over the trace, run telemetry and live progress.

Inputs are the small frames of :mod:`profilers.frames.timeline` and :mod:`profilers.frames.telemetry`; step boundaries are drawn
as thin vertical lines (at most :data:`MAX_STEP_LINES`) so that utilisation and memory read against the steps.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from profilers.trace.breakdown import CATEGORIES
from reports.charts import CATEGORY_COLORS, SERIES_COLORS, category_name, style
from profilers.frames.telemetry import metric_columns

MAX_STEP_LINES = 120
UTIL_METRICS = ("gpu_util_pct", "cpu_pct")
MEMORY_METRICS = ("mem_used_mb", "rss_mb", "gpu_memory_used_mb", "cuda_allocated_mb")
#: Legend names of the telemetry columns: what a reader sees instead of "cpu_pct", "rss_mb".
METRIC_NAMES = {
    "gpu_util_pct": "GPU utilisation",
    "cpu_pct": "run's CPU (100% = one core)",
    "mem_used_mb": "GPU memory used",
    "rss_mb": "run's host memory (RSS)",
    "gpu_memory_used_mb": "GPU memory used",
    "cuda_allocated_mb": "CUDA allocated",
}
#: The first step's time above this multiple of the median of the others is left above the live chart's axis.
FIRST_STEP_OUTLIER = 3.0


def step_lines(fig: go.Figure, starts: list[float]) -> None:
    """Dotted vertical lines at step starts across the whole plot area, added in one layout update (plotly's
    ``add_vline`` re-validates the figure per call: 120 of them on a two-row figure took seconds)."""
    lines = [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": x,
            "x1": x,
            "y0": 0,
            "y1": 1,
            "line": {"width": 1, "dash": "dot", "color": "#888"},
            "opacity": 0.5,
        }
        for x in starts[:MAX_STEP_LINES]
    ]
    if lines:
        fig.update_layout(shapes=[*fig.layout.shapes, *lines])


def timeline(tl: pd.DataFrame, spans: pd.DataFrame, rank: int) -> go.Figure:
    """Stacked bars per time bucket of one rank: the ms each category claims; dotted lines at step starts."""
    df = tl[tl["rank"] == rank]
    fig = go.Figure()
    for cat in CATEGORIES:
        if cat in df and float(df[cat].sum()) > 0:
            share = (100 * df[cat] / df["width_ms"].where(df["width_ms"] > 0, 1)).round(2)
            fig.add_trace(
                go.Bar(
                    x=(df["t_ms"] + df["width_ms"] / 2).round(4).tolist(),
                    y=share.tolist(),
                    width=df["width_ms"].tolist(),
                    name=category_name(cat),
                    marker_color=CATEGORY_COLORS[cat],
                    marker_line_width=0,
                    hovertemplate=f"t=%{{x:.1f}} ms<br>{category_name(cat)}: %{{y:.0f}}%<extra></extra>",
                )
            )
    fig.update_layout(barmode="stack", bargap=0)
    fig.update_yaxes(range=[0, 100], ticksuffix="%")
    s = spans[spans["rank"] == rank]
    step_lines(fig, s["start_ms"].tolist())
    width = float(df["width_ms"].iloc[0]) if len(df) else 0.0
    return style(
        fig,
        f"Timeline of rank {rank} ({len(df)} buckets of {width:.2f} ms; dotted lines: step starts)",
        height=340,
        y_title="share of bucket",
        x_title="ms since the first step",
    )


def memory_over_time(mem: pd.DataFrame, spans: pd.DataFrame, rank: int) -> go.Figure:
    """Allocated and reserved memory (MiB) over the trace, per device kind, for one rank."""
    df = mem[mem["rank"] == rank]
    fig = go.Figure()
    for i, (device, g) in enumerate(df.groupby("device")):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        fig.add_trace(
            go.Scatter(
                x=g["t_ms"].round(3).tolist(),
                y=g["allocated_mb"].round(2).tolist(),
                name=f"{device} allocated",
                line={"color": color},
                mode="lines",
            )
        )
        if float(g["reserved_mb"].max()) > 0:
            fig.add_trace(
                go.Scatter(
                    x=g["t_ms"].round(3).tolist(),
                    y=g["reserved_mb"].round(2).tolist(),
                    name=f"{device} reserved",
                    line={"color": color, "dash": "dash"},
                    mode="lines",
                )
            )
    step_lines(fig, spans[spans["rank"] == rank]["start_ms"].tolist())
    return style(
        fig,
        f"Memory over the trace (rank {rank}): the profiler's allocator events (host: CPU tensors; "
        "device: CUDA/HIP)",
        y_title="MiB",
        x_title="ms since the first step",
    )


def step_marks(steps: pd.DataFrame, t0_ns: int) -> list[float]:
    """Start of each step (rank 0) in seconds since ``t0_ns``, from ``t_unix_ns`` (step end) and ``wall_ms``."""
    if steps.empty or steps["t_unix_ns"].isna().all():
        return []
    s = steps[steps["rank"] == steps["rank"].min()].dropna(subset=["t_unix_ns"])
    return (
        ((s["t_unix_ns"].astype("int64") - t0_ns) / 1e9 - s["wall_ms"].fillna(0) / 1e3)
        .round(4)
        .tolist()
    )


def telemetry(tel: pd.DataFrame, steps: pd.DataFrame, source: str | None = None) -> go.Figure:
    """Utilisation (%) above memory (MiB) over the run, dotted lines at step starts (aligned by wall clock).
    A panel whose metrics the run did not record is left out rather than drawn empty."""
    metrics = metric_columns(tel) if not tel.empty else []
    present = [
        names
        for names in (UTIL_METRICS, MEMORY_METRICS)
        if any(m in metrics and tel[m].notna().any() for m in names)
    ] or [UTIL_METRICS]
    titles = {UTIL_METRICS: "Utilisation (%)", MEMORY_METRICS: "Memory (MiB)"}
    fig = make_subplots(
        rows=len(present),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=[titles[p] for p in present],
    )
    by_gpu = "gpu" in tel.columns and tel["gpu"].notna().any()
    groups = list(tel.groupby("gpu", dropna=False)) if by_gpu else [(None, tel)]
    i = 0
    for gpu, g in groups:
        suffix = (
            ""
            if not by_gpu
            else " host"
            if gpu is None or pd.isna(gpu)
            else f" gpu{int(g['gpu'].iloc[0])}"
        )
        for row, names in enumerate(present, start=1):
            for m in (
                m for m in names if m in metrics and g[m].notna().any()
            ):  # host rows: no GPU metric
                fig.add_trace(
                    go.Scatter(
                        x=g["t_s"].round(3).tolist(),
                        y=g[m].round(2).tolist(),
                        mode="lines",
                        name=f"{METRIC_NAMES.get(m, m)}{suffix}",
                        line={"color": SERIES_COLORS[i % len(SERIES_COLORS)]},
                    ),
                    row=row,
                    col=1,
                )
                i += 1
    if not tel.empty and not steps.empty:
        step_lines(fig, step_marks(steps, int(tel["t_unix_ns"].min())))
    where = f" — {source}" if source else ""
    fig.update_xaxes(title_text="s since the first sample", row=len(present), col=1)
    return style(
        fig, f"Telemetry{where}; dotted lines: step starts", height=260 + 200 * (len(present) - 1)
    )


def live_progress(steps: pd.DataFrame) -> go.Figure:
    """Step time (ms) and loss per step while a run trains (rank 0). Profiled steps are marked (the profiler
    slows them); a first step far slower than the rest (start-up, compilation) stays above the axis, said in
    the title, so it does not flatten every other step."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Step time (ms)", "Loss"))
    title = "Progress"
    if not steps.empty:
        s = steps[steps["rank"] == steps["rank"].min()]
        fig.add_trace(
            go.Scatter(
                x=s["step"].tolist(),
                y=s["wall_ms"].round(3).tolist(),
                mode="lines+markers",
                name="step time",
                line={"color": SERIES_COLORS[0]},
            ),
            row=1,
            col=1,
        )
        if "profiled" in s and s["profiled"].fillna(False).astype(bool).any():
            p = s[s["profiled"].fillna(False).astype(bool)]
            fig.add_trace(
                go.Scatter(
                    x=p["step"].tolist(),
                    y=p["wall_ms"].round(3).tolist(),
                    mode="markers",
                    name="profiled (the profiler slows it)",
                    marker={"symbol": "diamond-open", "size": 11, "color": SERIES_COLORS[3]},
                ),
                row=1,
                col=1,
            )
        fig.add_trace(
            go.Scatter(
                x=s["step"].tolist(),
                y=s["loss"].round(5).tolist(),
                mode="lines+markers",
                name="loss",
                line={"color": SERIES_COLORS[1]},
            ),
            row=1,
            col=2,
        )
        walls = s["wall_ms"].dropna()
        if len(walls) >= 3:
            rest = float(walls.iloc[1:].median())
            first = float(walls.iloc[0])
            if rest > 0 and first > FIRST_STEP_OUTLIER * rest:
                fig.update_yaxes(range=[0, float(walls.iloc[1:].max()) * 1.15], row=1, col=1)
                title = f"Progress (step {int(s['step'].iloc[0])}: {first:,.0f} ms, above the axis: start-up)"
    fig.update_xaxes(title_text="step")
    return style(fig, title, height=300)
