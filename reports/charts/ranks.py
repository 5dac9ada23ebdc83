"""A watched run's ranks over time: each rank's step time and its own work per step, captures marked."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from reports.charts import SERIES_COLORS, label, style


def ranks_over_time(steps: pd.DataFrame, captures: list[dict[str, Any]]) -> go.Figure:
    """``steps`` (``profilers.run.rank_timeline.rank_steps``: rank, step, wall_ms, work_ms) as a line per rank in
    two panels (step time; work: the step minus its time inside backward, where the ranks done first wait for the
    slowest), each capture a shaded band over its profiled steps named by its trigger."""
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=("Step time per rank (ms)", "Own work per rank: step minus backward (ms)"),
    )
    for i, (rank, s) in enumerate(steps.groupby("rank", sort=True)):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        for row, field in ((1, "wall_ms"), (2, "work_ms")):
            fig.add_trace(
                go.Scatter(
                    x=s["step"].tolist(),
                    y=s[field].round(3).tolist(),
                    mode="lines",
                    name=f"rank {rank}",
                    legendgroup=f"rank {rank}",
                    showlegend=row == 1,
                    line={"color": color, "width": 1.5},
                    hovertemplate=f"rank {rank}, step %{{x}}: %{{y:.2f}} ms<extra></extra>",
                ),
                row=row,
                col=1,
            )
    for c in captures:
        first, last = (c.get("steps") or [None, None])[:2]
        if first is None or last is None:
            continue
        trigger = c.get("trigger") or {}
        ranks = c.get("ranks") or [c.get("rank")]
        fig.add_vrect(
            x0=first - 0.5,
            x1=last + 0.5,
            fillcolor=SERIES_COLORS[3],
            opacity=0.25,
            line_width=0,
            annotation_text=label(
                f"{trigger.get('kind', 'capture')} · rank {', '.join(str(r) for r in ranks)}"
            ),
            annotation_position="top left",
        )
    fig.update_xaxes(title_text="step", row=2, col=1)
    n = steps["rank"].nunique() if len(steps) else 0
    return style(
        fig,
        f"Ranks over the run: {n} rank{'s' if n != 1 else ''}, {len(captures)} capture(s) shaded",
        height=560,
    )
