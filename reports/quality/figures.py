"""A time-to-quality experiment's figures: the metric against wall-clock time for both arms of a round (the target
as a line, each arm's time to target marked) and early stopping's trade-off curve. Charts of the runs' curves,
drawn from the stored JSON report (``report.json``: each seed's curve), which the record does not carry."""

from __future__ import annotations

from typing import Any, Mapping

import plotly.graph_objects as go

from reports.charts import SERIES_COLORS, label, style


def _arm_traces(
    fig: go.Figure, curves: list[Mapping[str, Any]], name: str, color: str, reached_s: float | None
) -> None:
    for i, c in enumerate(curves):
        fig.add_trace(
            go.Scatter(
                x=c["t_s"],
                y=c["value"],
                mode="lines",
                name=label(name),
                legendgroup=name,
                showlegend=i == 0,
                line={"color": color, "width": 1.5},
                opacity=0.85,
                hovertemplate=f"{label(name)} seed {c['seed']}<br>%{{x:.2f}} s: "
                "%{y:.4f}<extra></extra>",
            )
        )
    if reached_s is not None:
        fig.add_vline(
            x=reached_s,
            line={"color": color, "dash": "dash", "width": 2},
            annotation_text=f"{label(name, 30)}: {reached_s:.2f} s",
            annotation_position="top",
        )


def round_figure(out: Mapping[str, Any], round_no: int | None = None) -> go.Figure:
    """Baseline and one round's arm (``round_no``; the first with runs when ``None``) against wall-clock time;
    the target as a horizontal line; each arm's MLPerf time to target as a dashed vertical line. An early-stopping
    round marks where each baseline seed would have stopped."""
    t = out["target"]
    rounds = [r for r in out["rounds"] if round_no is None or r["round"] == round_no]
    rnd = next((r for r in rounds if r["curves"] or r["early_stopping"]), None)
    fig = go.Figure()
    base = out["baseline"]
    if (
        rnd is not None and rnd["time_to_target"] and rnd.get("baseline_curves")
    ):  # its own interleaved seeds
        _arm_traces(
            fig,
            rnd["baseline_curves"],
            "baseline",
            SERIES_COLORS[0],
            rnd["time_to_target"]["before_s"],
        )
    else:
        _arm_traces(
            fig, base["curves"], "baseline", SERIES_COLORS[0], base["time_to_target"]["seconds"]
        )
    title = "baseline"
    if rnd is not None and rnd["time_to_target"]:
        _arm_traces(
            fig, rnd["curves"], rnd["title"], SERIES_COLORS[1], rnd["time_to_target"]["after_s"]
        )
        title = f"baseline vs {rnd['title']}"
    elif rnd is not None and rnd["early_stopping"]:
        stops = [p for p in rnd["early_stopping"]["per_seed"] if p["stop_s"] is not None]
        if stops:
            fig.add_trace(
                go.Scatter(
                    x=[p["stop_s"] for p in stops],
                    y=[p["value_at_stop"] for p in stops],
                    mode="markers",
                    name="early stop",
                    marker={"color": SERIES_COLORS[3], "size": 10, "symbol": "x"},
                )
            )
        title = f"early stopping: saves {rnd['early_stopping']['saved_s']:.2f} s"
    fig.add_hline(
        y=t["value"],
        line={"color": "#444", "dash": "dot"},
        annotation_text=f"target {t['value']:.4g} ({label(t['source'], 40)})",
        annotation_position="bottom right",
    )
    return style(
        fig, label(title), height=380, y_title=label(t["metric"], 60), x_title="wall-clock time (s)"
    )


def tradeoff_figure(rnd: Mapping[str, Any]) -> go.Figure | None:
    """Early stopping's trade-off: for each seed, the share of the run's time saved (x) against the metric given
    up (y) if the run had stopped at each point; the patience rule's point marked, and the target's when given."""
    es = rnd.get("early_stopping") or {}
    curves = es.get("tradeoff") or []
    if not curves:
        return None
    fig = go.Figure()
    for seed, pts in enumerate(curves):
        fig.add_trace(
            go.Scatter(
                x=[p["saved_share"] * 100 for p in pts],
                y=[p["given_up"] for p in pts],
                mode="lines+markers",
                name=f"seed {seed}",
                line={"width": 1.5},
                marker={"size": 4},
                customdata=[p["step"] for p in pts],
                hovertemplate="stop at step %{customdata}: saves %{x:.0f}% of the time, gives up "
                "%{y:.4g}<extra></extra>",
            )
        )
    for key, name, symbol in (
        ("per_seed", "patience rule", "x"),
        ("at_target", "first at the target", "star"),
    ):
        marks = [p for p in es.get(key) or [] if p and p["stop_s"] is not None]
        if marks:
            fig.add_trace(
                go.Scatter(
                    x=[p["saved_share"] * 100 for p in marks],
                    y=[p["given_up"] for p in marks],
                    mode="markers",
                    name=name,
                    marker={"size": 11, "symbol": symbol},
                )
            )
    return style(
        fig,
        label(f"early stopping: time saved vs metric given up ({es.get('outcome', '')})"),
        height=340,
        y_title="metric given up (vs the run's best)",
        x_title="time saved (% of the run)",
    )
