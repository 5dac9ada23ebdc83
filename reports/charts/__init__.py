"""Plotly figures of a breakdown: small functions from values to figures, shared by the dashboard and the reports.

The colours of the step-time categories and of the bottleneck classes are defined here, once, so that every
chart (dashboard or exported report) shows ``dataloader`` in the same orange. Every string that comes from a
trace (kernel, op or rank names) goes through :func:`label`, which HTML-escapes it: plotly renders a small
HTML subset in labels, and a kernel called ``<img onerror=…>`` must stay text.

Time-based charts live in :mod:`reports.charts.over_time`, before/after and A-vs-B charts in
:mod:`reports.charts.compare`.
"""

from __future__ import annotations

import html
import os

import pandas as pd
import plotly.graph_objects as go

from profilers.trace.breakdown import CATEGORIES
from profilers.trace.memory_snapshot import MemorySnapshot

CATEGORY_COLORS: dict[str, str] = {
    "gpu_compute": "#4C78A8",
    "gpu_memcpy": "#72B7B2",
    "gpu_memset": "#9ECAE9",
    "communication": "#E45756",
    "dataloader": "#F58518",
    "host_runtime": "#B279A2",
    "optimizer": "#54A24B",
    "backward": "#EECA3B",
    "forward": "#88D27A",
    "other": "#BAB0AC",
}
CATEGORY_MEANING: dict[str, str] = {
    "gpu_compute": "GPU kernels (collectives excluded)",
    "gpu_memcpy": "GPU memory copies",
    "gpu_memset": "GPU memory sets",
    "communication": "collectives not hidden under other work",
    "dataloader": "waiting for the next batch",
    "host_runtime": "CUDA/HIP runtime calls while the GPU idles",
    "optimizer": "the optimizer step on the host",
    "backward": "autograd on the host",
    "forward": "forward operators on the host",
    "other": "Python overhead and idle time",
}
BOTTLENECK_COLORS: dict[str, str] = {
    "data": "#F58518",
    "memory": "#72B7B2",
    "compute": "#4C78A8",
    "communication": "#E45756",
    "host": "#B279A2",
    "none": "#BAB0AC",
}
#: Work per rank, and the straggler: neutral grey and near-black, colours no category or class uses.
WORK_COLOR, STRAGGLER_COLOR = "#8C8C96", "#1B1B1B"
SERIES_COLORS = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#B279A2", "#72B7B2")  # A, B, …
TEMPLATE = "plotly_white"
MAX_LABEL = 80


def label(text: object, limit: int = MAX_LABEL) -> str:
    """A trace-derived string made safe for a plotly label: truncated, then HTML-escaped."""
    s = str(text)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return html.escape(s, quote=True)


def category_name(cat: str) -> str:
    return cat.replace("_", " ")


def style(
    fig: go.Figure,
    title: str,
    height: int = 360,
    y_title: str | None = None,
    x_title: str | None = None,
) -> go.Figure:
    """The common look: white template, compact margins, legend on top."""
    lines = title.count("<br>")  # a title broken into lines gets the room for them above the plot
    fig.update_layout(
        title={"text": title, "x": 0, "font": {"size": 15}},
        template=TEMPLATE,
        height=height + 20 * lines,
        margin={"l": 10, "r": 10, "t": 50 + 20 * lines, "b": 10},
        legend={"title": None, "traceorder": "normal"},
    )
    if y_title:
        fig.update_yaxes(title_text=y_title)
    if x_title:
        fig.update_xaxes(title_text=x_title)
    return fig


def _stacked(x: list[str] | pd.Series, ms: pd.DataFrame, hover_x: str) -> list[go.Bar]:
    """One bar trace per category with time; its figure shows the legend even for one (``showlegend``)."""
    bars = []
    for cat in CATEGORIES:
        if cat in ms and float(ms[cat].sum()) > 0:
            bars.append(
                go.Bar(
                    x=list(x),
                    y=ms[cat].round(3).tolist(),
                    name=category_name(cat),
                    marker_color=CATEGORY_COLORS[cat],
                    hovertemplate=f"{hover_x} %{{x}}<br>{category_name(cat)}: %{{y:.2f}} ms<extra></extra>",
                )
            )
    return bars


def step_breakdown(per_step: pd.DataFrame, rank: int | None = None) -> go.Figure:
    """Stacked bars of step time per step (ms): one rank, or the mean over ranks when ``rank`` is None."""
    df = per_step if rank is None else per_step[per_step["rank"] == rank]
    ms = df.groupby("step")[list(CATEGORIES)].mean() / 1e6
    fig = go.Figure(_stacked([str(s) for s in ms.index], ms, "step"), layout={"showlegend": True})
    fig.update_layout(barmode="stack")
    who = (
        "mean over ranks"
        if rank is None and per_step["rank"].nunique() > 1
        else f"rank {rank}"
        if rank is not None
        else "per step"
    )
    fig.update_xaxes(type="category")
    return style(fig, f"Step time by category ({who})", y_title="ms", x_title="step")


def rank_breakdown(per_step: pd.DataFrame) -> go.Figure:
    """Stacked bars per rank: mean ms per step in each category."""
    ms = per_step.groupby("rank")[list(CATEGORIES)].mean() / 1e6
    fig = go.Figure(_stacked([f"rank {r}" for r in ms.index], ms, ""), layout={"showlegend": True})
    fig.update_layout(barmode="stack")
    return style(fig, "Mean step time per rank by category", y_title="ms per step")


def share_bar(shares: dict[str, float], title: str = "Where step time goes") -> go.Figure:
    """One horizontal 100% bar of category shares (the headline picture)."""
    fig = go.Figure()
    for cat in CATEGORIES:
        v = float(shares.get(cat, 0.0))
        if v > 0:
            fig.add_trace(
                go.Bar(
                    y=[""],
                    x=[100 * v],
                    orientation="h",
                    name=category_name(cat),
                    marker_color=CATEGORY_COLORS[cat],
                    text=[f"{100 * v:.0f}%" if v >= 0.05 else ""],
                    textposition="inside",
                    hovertemplate=f"{category_name(cat)}: %{{x:.1f}}%<extra></extra>",
                )
            )
    # a legend even for one category: plotly hides it for a single trace, and the colour alone names nothing
    fig.update_layout(
        barmode="stack", xaxis={"range": [0, 100], "ticksuffix": "%"}, showlegend=True
    )
    style(fig, title, height=210)
    fig.update_layout(legend={"orientation": "h", "yanchor": "top", "y": -0.35, "x": 0})
    return fig


KCLASS_COLORS: dict[str, str] = {
    "matmul": "#4C78A8",
    "normalization": "#72B7B2",
    "elementwise": "#EECA3B",
    "communication": "#E45756",
    "memory": "#9ECAE9",
    "other": "#BAB0AC",
}


def distinct_labels(names: list[str], limit: int = 60) -> list[str]:
    """Short axis labels, one per name and never two alike. A long name keeps its start and its end
    (``void gemm_kernel<…>::run_128x64``); names whose short forms collide show, after their start, the part
    where they differ from each other; any still equal get ``#2``, ``#3``."""
    half = (limit - 1) // 2

    def short(n: str) -> str:
        return n if len(n) <= limit else f"{n[:half]}…{n[-(limit - 1 - half) :]}"

    out = [short(n) for n in names]
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(out):
        groups.setdefault(s, []).append(i)
    for members in (m for m in groups.values() if len(m) > 1):
        full = [names[i] for i in members]
        p = len(os.path.commonprefix(full))
        head, at = limit // 3, max(p - 6, limit // 3)
        for i, n in zip(members, full):
            if len(n) > limit:
                tail = n[at : at + limit - head - 2]
                out[i] = f"{n[:head]}…{tail}{'…' if at + len(tail) < len(n) else ''}"
    seen: dict[str, int] = {}
    for i, s in enumerate(out):
        seen[s] = seen.get(s, 0) + 1
        out[i] = s if seen[s] == 1 else f"{s} #{seen[s]}"
    return out


def hover_text(text: str, width: int = 90) -> str:
    """An escaped trace string broken into hover lines of ``width`` characters."""
    return (
        "<br>".join(
            html.escape(text[i : i + width], quote=True) for i in range(0, len(text), width)
        )
        or "(empty)"
    )


def top_items(
    table: pd.DataFrame, title: str, n: int = 15, color_by: str | None = None
) -> go.Figure:
    """Horizontal bars of the ``n`` largest rows of a kernel or op table (``name``, ``total_ns``).

    One bar per row, always: the axis labels are shortened so that they stay distinct
    (:func:`distinct_labels`) and the full name is in the hover. With ``color_by="kclass"`` the bars are
    coloured by kernel class and the legend says which colour is which class."""
    top = table.head(n).iloc[::-1].reset_index(drop=True)
    names = [str(x) for x in top["name"]]
    ys = [label(s, 10**6) for s in distinct_labels(names)]
    full = [hover_text(x) for x in names]
    ms = (top["total_ns"] / 1e6).round(3).tolist()
    by_class = color_by == "kclass" and "kclass" in top
    classes = [str(k) for k in top["kclass"]] if by_class else ["all"] * len(top)
    fig = go.Figure()
    for cls in dict.fromkeys(classes):
        idx = [i for i, c in enumerate(classes) if c == cls]
        fig.add_trace(
            go.Bar(
                y=[ys[i] for i in idx],
                x=[ms[i] for i in idx],
                orientation="h",
                name=f"{cls} kernels",
                marker_color=KCLASS_COLORS.get(cls, KCLASS_COLORS["other"])
                if by_class
                else CATEGORY_COLORS["gpu_compute"],
                customdata=[full[i] for i in idx],
                showlegend=by_class,
                hovertemplate="%{customdata}<br>%{x:.2f} ms in steps<extra></extra>",
            )
        )
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=ys)
    fig.update_layout(barmode="overlay")
    style(fig, title, height=max(240, 22 * len(top) + 110), x_title="ms (all steps)")
    if by_class:
        fig.update_layout(
            legend={
                "orientation": "h",
                "yanchor": "bottom",
                "y": 1.0,
                "x": 0,
                "title": {"text": "colour = kernel class"},
            }
        )
    return fig


def straggler(per_rank: pd.DataFrame, straggler_rank: int | None) -> go.Figure:
    """Per rank: median work (step minus exposed communication) and exposed communication. ``straggler_rank``
    (only a marked straggler, see :mod:`profilers.jobs.straggler`) is drawn in :data:`STRAGGLER_COLOR`,
    a colour no category uses, with its own legend entry."""
    fig = go.Figure()
    marked = per_rank["rank"] == straggler_rank  # all False when there is none
    for is_straggler in (False, True):
        rows = per_rank[marked if is_straggler else ~marked]
        if rows.empty:
            continue
        fig.add_trace(
            go.Bar(
                x=[f"rank {r}" for r in rows["rank"]],
                y=rows["work_ms"].round(3).tolist(),
                name="straggler: work beyond the noise (ms)" if is_straggler else "work (ms)",
                marker_color=STRAGGLER_COLOR if is_straggler else WORK_COLOR,
                hovertemplate="%{x}: %{y:.2f} ms of work per step<extra></extra>",
            )
        )
    fig.add_trace(
        go.Bar(
            x=[f"rank {r}" for r in per_rank["rank"]],
            y=per_rank["exposed_comm_ms"].round(3).tolist(),
            name="exposed communication (ms)",
            marker_color=CATEGORY_COLORS["communication"],
            opacity=0.55,
            hovertemplate="%{x}: %{y:.2f} ms exposed communication<extra></extra>",
        )
    )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(
        type="category",
        categoryorder="array",
        categoryarray=[f"rank {r}" for r in per_rank["rank"]],
    )
    note = f" — rank {straggler_rank} is the straggler" if straggler_rank is not None else ""
    return style(fig, f"Median step per rank{note}", y_title="ms per step")


def memory_peak(peaks: dict[str, float | None], capacity_mb: float | None, title: str) -> go.Figure:
    """Horizontal bars of peak memory figures (MiB) against a capacity line when one is known."""
    items = [(k, v) for k, v in peaks.items() if v is not None]
    fig = go.Figure(
        go.Bar(
            y=[k for k, _ in items],
            x=[round(v, 1) for _, v in items],
            orientation="h",
            marker_color=CATEGORY_COLORS["gpu_memcpy"],
            hovertemplate="%{y}: %{x:.0f} MiB<extra></extra>",
        )
    )
    if capacity_mb:
        fig.add_vline(
            x=capacity_mb,
            line_dash="dash",
            line_color="#E45756",
            annotation_text=f"capacity {capacity_mb:.0f} MiB",
            annotation_position="top left",
        )
        fig.update_xaxes(
            range=[0, max(capacity_mb, *(v for _, v in items)) * 1.1] if items else [0, capacity_mb]
        )
    return style(fig, title, height=200 + 20 * len(items), x_title="MiB")


def snapshot_memory(s: MemorySnapshot, device_memory_bytes: int | None) -> go.Figure:
    """A memory snapshot's peak live, reserved and live-at-dump memory against the device total when stated."""
    mib = 1024**2
    peaks = {
        "peak live (replayed history)": s.peak_allocated_bytes / mib
        if s.peak_allocated_bytes
        else None,
        "reserved by the allocator": s.reserved_bytes / mib,
        "live at the dump": s.allocated_bytes / mib,
    }
    return memory_peak(
        peaks, device_memory_bytes / mib if device_memory_bytes else None, "Memory snapshot"
    )


def category_key(columns: int = 2) -> go.Figure:
    """The colour key: a swatch per category with what it means (the same colours in every chart)."""
    cats = list(CATEGORIES)
    rows = -(-len(cats) // columns)
    xs = [i // rows for i in range(len(cats))]
    ys = [rows - i % rows for i in range(len(cats))]
    fig = go.Figure(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers+text",
            marker={"symbol": "square", "size": 16, "color": [CATEGORY_COLORS[c] for c in cats]},
            text=[f"<b>{category_name(c)}</b>: {CATEGORY_MEANING[c]}" for c in cats],
            textposition="middle right",
            hoverinfo="skip",
            showlegend=False,
        )
    )
    fig.update_xaxes(visible=False, range=[-0.05, columns])
    fig.update_yaxes(visible=False, range=[0.4, rows + 0.6])
    style(
        fig,
        "Step time is attributed to these categories (the same colours in every chart)",
        height=60 + 26 * rows,
    )
    fig.update_layout(margin={"l": 10, "r": 10, "t": 36, "b": 4})
    return fig
