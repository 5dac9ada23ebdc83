"""A watched run over its whole length: step time, batch-drawing share and loss, with each capture marked where it
happened (a band over its profiled steps, and a marker whose hover says what triggered it).

The points are :func:`profilers.run.step_records.timeline`'s: a point per whole step and one per roll-up (its
median step time, with its p10–p90 drawn as a band), so a run of a million steps draws a few thousand points.
"""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from reports.charts import SERIES_COLORS, style
from reports.charts.over_time import FIRST_STEP_OUTLIER

CAPTURE_COLOR = "rgba(214, 39, 40, 0.16)"


def capture_hover(capture: dict[str, Any]) -> str:
    """A capture's words on the chart: its number, profiled steps, trigger and (once judged) bottleneck."""
    trigger = capture.get("trigger") or {}
    first, last = capture.get("steps") or (None, None)
    said = (
        f"capture {capture.get('n')}: steps {first:,}–{last:,}" if first is not None else "capture"
    )
    said += (
        f"<br>trigger: {trigger.get('kind', '?')} at step {trigger.get('step', '?')} — "
        f"{trigger.get('reason', '')}"
    )
    if capture.get("bottleneck"):
        said += f"<br>bottleneck: {capture['bottleneck']}"
    return said


def watch_timeline(points: pd.DataFrame, captures: Sequence[dict[str, Any]]) -> go.Figure:
    """Three stacked plots over the step axis; ``captures``: :func:`profilers.run.captures.capture_records`'s (a
    ``bottleneck`` key, when there is one, is shown in the hover)."""
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.07,
        subplot_titles=("Step time (ms)", "Batch drawing (share of the step)", "Loss"),
    )
    if not points.empty:
        x = ((points["first_step"] + points["last_step"]) / 2).tolist()
        rolled = points["rolled"].astype(bool)
        if rolled.any():
            r = points[rolled]
            xr = ((r["first_step"] + r["last_step"]) / 2).tolist()
            fig.add_trace(
                go.Scatter(
                    x=xr + xr[::-1],
                    y=r["wall_ms_p90"].tolist() + r["wall_ms_p10"].tolist()[::-1],
                    fill="toself",
                    fillcolor="rgba(31, 119, 180, 0.15)",
                    line={"width": 0},
                    name="p10–p90 (rolled up)",
                    hoverinfo="skip",
                ),
                row=1,
                col=1,
            )
        counts = points["steps"].fillna(1).astype(int)
        hover = [
            f"steps {a:,}–{b:,} ({n:,} rolled up): median" if up else f"step {a:,}"
            for a, b, n, up in zip(points["first_step"], points["last_step"], counts, rolled)
        ]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=points["wall_ms"].round(3).tolist(),
                mode="lines",
                name="step time",
                text=hover,
                hovertemplate="%{text}: %{y:.2f} ms<extra></extra>",
                line={"color": SERIES_COLORS[0]},
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=points["data_share"].round(4).tolist(),
                mode="lines",
                name="batch drawing",
                text=hover,
                hovertemplate="%{text}: %{y:.0%}<extra></extra>",
                line={"color": SERIES_COLORS[2]},
            ),
            row=2,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=points["loss"].round(5).tolist(),
                mode="lines",
                name="loss",
                text=hover,
                hovertemplate="%{text}: %{y:.4f}<extra></extra>",
                line={"color": SERIES_COLORS[1]},
            ),
            row=3,
            col=1,
        )
    _mark_captures(fig, points, captures)
    walls = [float(w) for w in points["wall_ms"].dropna()] if not points.empty else []
    if len(walls) >= 3 and walls[0] > FIRST_STEP_OUTLIER * float(pd.Series(walls[1:]).median()) > 0:
        # a first step far slower (start-up, compilation) stays above the axis, as on the launch's live chart
        fig.update_yaxes(range=[0, max(walls[1:]) * 1.15], row=1, col=1)
    fig.update_yaxes(tickformat=".0%", rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title_text="step", row=3, col=1)
    n = len(captures)
    return style(fig, f"The whole run ({n} capture{'s' if n != 1 else ''} marked)", height=560)


def _mark_captures(
    fig: go.Figure, points: pd.DataFrame, captures: Sequence[dict[str, Any]]
) -> None:
    marks: list[tuple[float, str]] = []
    for capture in captures:
        steps = capture.get("steps")
        if not isinstance(steps, (list, tuple)) or len(steps) != 2:
            continue
        first, last = float(steps[0]), float(steps[1])
        for row in (1, 2, 3):  # a shape per plot: a band from the first profiled step to the last
            fig.add_vrect(
                x0=first - 0.5,
                x1=last + 0.5,
                fillcolor=CAPTURE_COLOR,
                line_width=1,
                line_color="rgba(214, 39, 40, 0.6)",
                layer="below",
                row=row,
                col=1,
            )
        marks.append(((first + last) / 2, capture_hover(capture)))
    if marks:
        top = (
            float(points["wall_ms"].iloc[1:].max())
            if len(points) > 1 and points["wall_ms"].notna().any()
            else 1.0
        )
        fig.add_trace(
            go.Scatter(
                x=[m[0] for m in marks],
                y=[top * 1.05] * len(marks),
                mode="markers",
                name="capture",
                text=[m[1] for m in marks],
                hovertemplate="%{text}<extra></extra>",
                marker={"symbol": "triangle-down", "size": 12, "color": "rgb(214, 39, 40)"},
            ),
            row=1,
            col=1,
        )
