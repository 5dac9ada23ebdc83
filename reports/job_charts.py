"""Figures of a many-rank job's cross-rank views (``analyze --json``'s ``job``): rank × step heat maps."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

MAX_ROWS = 1024  # a heat map row per rank: a thousand ranks still draw as one image


def rank_step_heatmap(job: dict[str, Any], field: str, title: str) -> go.Figure:
    """``job[field]`` (rank × step, ms) as a heat map; the straggler's row marked on the axis."""
    ranks = job["ranks"][:MAX_ROWS]
    culprit = (job.get("straggler") or {}).get("culprit")
    labels = [f"▶ {r}" if r == culprit else str(r) for r in ranks]
    fig = go.Figure(go.Heatmap(z=job[field][:MAX_ROWS], x=[str(s) for s in job["steps"]], y=labels,
                               colorscale="Viridis", colorbar={"title": "ms"},
                               hovertemplate="rank %{y}, step %{x}: %{z:.2f} ms<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="step", yaxis_title="rank", yaxis={"type": "category",
                      "autorange": "reversed"}, height=min(900, 160 + 14 * len(ranks)), margin={"t": 50})
    return fig
