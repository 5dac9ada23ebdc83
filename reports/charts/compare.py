"""Side-by-side charts: step time distributions, breakdown before/after, loss curves overlaid, top deltas.

Used by the Compare page, the Advisor's before/after view and the exported reports. Series labels may come
from run labels (user or trace supplied), so they pass through :func:`reports.charts.label`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from profilers.trace.breakdown import CATEGORIES
from reports.charts import CATEGORY_COLORS, SERIES_COLORS, category_name, label, style


def step_time_distributions(
    samples: Mapping[str, Sequence[float]], title: str = "Step time"
) -> go.Figure:
    """Box plots of per-step times (ms) with every sample shown; the box is the interquartile range."""
    fig = go.Figure()
    for i, (name, values) in enumerate(samples.items()):
        vals = [float(v) for v in values]
        med = float(np.median(vals)) if vals else float("nan")
        fig.add_trace(
            go.Box(
                y=vals,
                name=f"{label(name, 40)}<br>median {med:.1f} ms",
                boxpoints="all",
                jitter=0.3,
                pointpos=0,
                marker_color=SERIES_COLORS[i % len(SERIES_COLORS)],
                boxmean=False,
            )
        )
    return style(fig, title, y_title="ms per step")


def breakdown_side_by_side(
    ms: Mapping[str, Mapping[str, float]], title: str = "Breakdown per step"
) -> go.Figure:
    """One stacked bar per side: ms per step in each category (``{side: {category: ms}}``)."""
    names = [label(n, 40) for n in ms]
    fig = go.Figure()
    for cat in CATEGORIES:
        ys = [float(side.get(cat, 0.0)) for side in ms.values()]
        if any(ys):
            fig.add_trace(
                go.Bar(
                    x=names,
                    y=[round(y, 3) for y in ys],
                    name=category_name(cat),
                    marker_color=CATEGORY_COLORS[cat],
                    hovertemplate=f"{category_name(cat)}: %{{y:.2f}} ms<extra></extra>",
                )
            )
    fig.update_layout(
        barmode="stack", showlegend=True
    )  # named even when one category holds all the time
    return style(fig, title, y_title="ms per step")


def category_deltas(
    categories: pd.DataFrame, title: str = "Change per category (B − A)"
) -> go.Figure:
    """Horizontal bars of ``delta_ms`` per category: red where B is slower, green where it is faster."""
    df = categories[categories[["a_ms", "b_ms"]].abs().sum(axis=1) > 0]
    colors = ["#E45756" if d > 0 else "#54A24B" for d in df["delta_ms"]]
    fig = go.Figure(
        go.Bar(
            y=[category_name(c) for c in df["category"]],
            x=df["delta_ms"].round(3).tolist(),
            orientation="h",
            marker_color=colors,
            hovertemplate="%{y}: %{x:+.2f} ms per step<extra></extra>",
        )
    )
    return style(fig, title, height=300, x_title="ms per step")


def name_deltas(table: pd.DataFrame, title: str) -> go.Figure:
    """Horizontal bars of the kernels or ops whose time per step moved most (``name, delta_ms``)."""
    df = table.iloc[::-1]
    colors = ["#E45756" if d > 0 else "#54A24B" for d in df["delta_ms"]]
    fig = go.Figure(
        go.Bar(
            y=[label(n, 60) for n in df["name"]],
            x=df["delta_ms"].round(4).tolist(),
            orientation="h",
            marker_color=colors,
            hovertemplate="%{y}<br>%{x:+.3f} ms per step<extra></extra>",
        )
    )
    return style(fig, title, height=max(240, 22 * len(df) + 90), x_title="ms per step (B − A)")


def loss_curves(
    losses: Mapping[str, Sequence[float]], title: str = "Loss per step", identical: bool = False
) -> go.Figure:
    """Loss curves overlaid (one line per side). ``identical`` (the experiment's evidence says the arms' curves
    are the same values): said in the title, and the later lines dashed, so one line is not read as one arm."""
    fig = go.Figure()
    for i, (name, values) in enumerate(losses.items()):
        dash = "dash" if identical and i else None
        fig.add_trace(
            go.Scatter(
                x=list(range(len(values))),
                y=[float(v) for v in values],
                mode="lines+markers",
                name=label(name, 40),
                line={"color": SERIES_COLORS[i % len(SERIES_COLORS)], "dash": dash},
            )
        )
    if identical:
        title = f"{title}: identical in both arms (the lines lie on each other)"
    return style(fig, title, y_title="loss", x_title="step")


def ladder(rounds: pd.DataFrame, title: str = "Optimisation ladder") -> go.Figure:
    """The measured speed-up over the start after each kept round (``label``, ``speedup``: the product of the kept
    fixes' speed-ups, the ladder table's cumulative column). A view stored before that (``step_ms``) draws its
    median step per round, as it did then."""
    if "speedup" not in rounds or rounds["speedup"].isna().all():
        fig = go.Figure(
            go.Scatter(
                x=[label(x, 40) for x in rounds["label"]],
                y=rounds["step_ms"].round(3).tolist(),
                mode="lines+markers",
                line={"color": SERIES_COLORS[0]},
            )
        )
        return style(fig, title, y_title="median ms per step")
    fig = go.Figure(
        go.Scatter(
            x=[label(x, 40) for x in rounds["label"]],
            y=rounds["speedup"].round(3).tolist(),
            mode="lines+markers+text",
            text=[f"{v:.2f}×" for v in rounds["speedup"]],
            textposition="top center",
            line={"color": SERIES_COLORS[0]},
        )
    )
    return style(fig, title, y_title="speed-up over the start (×)")


MEMORY_TITLE = "Memory before and after (MB, the largest over each arm's runs)"


def memory_peaks(
    peaks: Mapping[str, tuple[float | None, float | None]], title: str = MEMORY_TITLE
) -> go.Figure:
    """Grouped bars, before beside after, one group per peak (``{peak name: (before MB, after
    MB)}``); a peak an arm did not record has no bar."""
    names = [label(n, 40) for n in peaks]
    fig = go.Figure()
    for i, side in enumerate(("before", "after")):
        ys = [pair[i] for pair in peaks.values()]
        fig.add_trace(
            go.Bar(
                x=names,
                y=ys,
                name=side,
                marker_color=SERIES_COLORS[i],
                text=["" if y is None else f"{y:.0f}" for y in ys],
                textposition="outside",
                hovertemplate=f"{side}: %{{y:.0f}} MB<extra></extra>",
            )
        )
    fig.update_layout(barmode="group", showlegend=True)
    return style(fig, title, height=300, y_title="MB")
