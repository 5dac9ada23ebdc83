"""What the user sees of a time-to-quality experiment: the metric against wall-clock time for both arms, the
target as a line, each arm's time to target marked; a Markdown summary and a self-contained HTML page.

Input is the JSON of ``optimize --to-quality`` (:mod:`advisors.experiments.to_quality_report`), so the command
line, the stored experiment and the Advisor page draw the same thing.
"""

from __future__ import annotations

import html
from typing import Any, Mapping

import plotly.graph_objects as go

from reports.charts import SERIES_COLORS, label, style
from advisors.experiments.to_quality_report import noise_line


def _arm_traces(fig: go.Figure, curves: list[Mapping[str, Any]], name: str, color: str,
                reached_s: float | None) -> None:
    for i, c in enumerate(curves):
        fig.add_trace(go.Scatter(x=c["t_s"], y=c["value"], mode="lines", name=label(name),
                                 legendgroup=name, showlegend=i == 0, line={"color": color, "width": 1.5},
                                 opacity=0.85, hovertemplate=f"{label(name)} seed {c['seed']}<br>%{{x:.2f}} s: "
                                                             "%{y:.4f}<extra></extra>"))
    if reached_s is not None:
        fig.add_vline(x=reached_s, line={"color": color, "dash": "dash", "width": 2},
                      annotation_text=f"{label(name, 30)}: {reached_s:.2f} s", annotation_position="top")


def round_figure(out: Mapping[str, Any], round_no: int | None = None) -> go.Figure:
    """Baseline and one round's arm (``round_no``; the first with runs when ``None``) against wall-clock time;
    the target as a horizontal line; each arm's MLPerf time to target as a dashed vertical line. An early-stopping
    round marks where each baseline seed would have stopped."""
    t = out["target"]
    rounds = [r for r in out["rounds"] if round_no is None or r["round"] == round_no]
    rnd = next((r for r in rounds if r["curves"] or r["early_stopping"]), None)
    fig = go.Figure()
    base = out["baseline"]
    if rnd is not None and rnd["time_to_target"] and rnd.get("baseline_curves"):  # its own interleaved seeds
        _arm_traces(fig, rnd["baseline_curves"], "baseline", SERIES_COLORS[0], rnd["time_to_target"]["before_s"])
    else:
        _arm_traces(fig, base["curves"], "baseline", SERIES_COLORS[0], base["time_to_target"]["seconds"])
    title = "baseline"
    if rnd is not None and rnd["time_to_target"]:
        _arm_traces(fig, rnd["curves"], rnd["title"], SERIES_COLORS[1], rnd["time_to_target"]["after_s"])
        title = f"baseline vs {rnd['title']}"
    elif rnd is not None and rnd["early_stopping"]:
        stops = [p for p in rnd["early_stopping"]["per_seed"] if p["stop_s"] is not None]
        if stops:
            fig.add_trace(go.Scatter(x=[p["stop_s"] for p in stops], y=[p["value_at_stop"] for p in stops],
                                     mode="markers", name="early stop", marker={"color": SERIES_COLORS[3],
                                                                                "size": 10, "symbol": "x"}))
        title = f"early stopping: saves {rnd['early_stopping']['saved_s']:.2f} s"
    fig.add_hline(y=t["value"], line={"color": "#444", "dash": "dot"},
                  annotation_text=f"target {t['value']:.4g} ({label(t['source'], 40)})",
                  annotation_position="bottom right")
    return style(fig, label(title), height=380, y_title=label(t["metric"], 60), x_title="wall-clock time (s)")


def tradeoff_figure(rnd: Mapping[str, Any]) -> go.Figure | None:
    """Early stopping's trade-off: for each seed, the share of the run's time saved (x) against the metric given
    up (y) if the run had stopped at each point; the patience rule's point marked, and the target's when given."""
    es = rnd.get("early_stopping") or {}
    curves = es.get("tradeoff") or []
    if not curves:
        return None
    fig = go.Figure()
    for seed, pts in enumerate(curves):
        fig.add_trace(go.Scatter(x=[p["saved_share"] * 100 for p in pts], y=[p["given_up"] for p in pts],
                                 mode="lines+markers", name=f"seed {seed}", line={"width": 1.5},
                                 marker={"size": 4}, customdata=[p["step"] for p in pts],
                                 hovertemplate="stop at step %{customdata}: saves %{x:.0f}% of the time, gives up "
                                               "%{y:.4g}<extra></extra>"))
    for key, name, symbol in (("per_seed", "patience rule", "x"), ("at_target", "first at the target", "star")):
        marks = [p for p in es.get(key) or [] if p and p["stop_s"] is not None]
        if marks:
            fig.add_trace(go.Scatter(x=[p["saved_share"] * 100 for p in marks], y=[p["given_up"] for p in marks],
                                     mode="markers", name=name, marker={"size": 11, "symbol": symbol}))
    return style(fig, label(f"early stopping: time saved vs metric given up ({es.get('outcome', '')})"), height=340,
                 y_title="metric given up (vs the run's best)", x_title="time saved (% of the run)")


def markdown(out: Mapping[str, Any]) -> str:
    """The experiment in Markdown (every name escaped by the table's plain text)."""
    t = out["target"]
    rows = ["| round | change | rule | time to target (before → after) | ratio [interval] | predicted / measured "
            "(steps × step time = time, after ÷ before) | verdict |", "|---|---|---|---|---|---|---|"]
    for r in out["rounds"]:
        tt = r["time_to_target"]
        if tt:
            before = "failed" if tt["before"]["failed"] else f"{tt['before_s']:.2f} s"
            after = "failed" if tt["after"]["failed"] else f"{tt['after_s']:.2f} s"
            ratio = _ratio(tt)
            cell = f"{before} → {after}"
        else:
            es = r["early_stopping"]
            cell = f"saves {es['saved_s']:.2f} s ({es['saved_share']:.0%})" if es else \
                f"not applied: {r['not_applied']}" if r.get("not_applied") else "advice"
            ratio = "—"
        verdict = r.get("outcome") or ("kept" if r["kept"] else "not applied" if r.get("not_applied") else "rejected")
        rows.append(f"| {r['round']} | {_md(r['title'])} | {_md(r['rule'])} | {_md(cell)} | {ratio} | "
                    f"{_prediction(r)} | {verdict} |")
    head = (f"**Target:** {_md(t['metric'])} {'≤' if t['goal'] == 'min' else '≥'} {t['value']:.4g} "
            f"({_md(t['source'])}{': ' + _md(t['note']) if t.get('note') else ''}); {out['seeds']} seed(s) per arm; "
            f"budget {_md((out.get('budget') or {}).get('stated') or '?')} per arm.")
    if out.get("one_run"):
        head += (f"\n\n**The {out['seeds']} seeds are one run:** the baseline's seeds gave the same curve (the script's "
                 "seed could not be varied); verdicts use a stated tolerance, not a spread of seeds.")
    if out.get("noise_scale"):
        head += "\n\n**Gradient noise scale:** " + _md(noise_line(out["noise_scale"]))
    tail = "".join(f"\n\n**{_md(r['title'])}:** {_md(r['reason'])}" for r in out["rounds"]
                   if r.get("early_stopping") or r.get("outcome") == "inconclusive")
    tail += f"\n\n{_md(out['projection']['text'])}" if out.get("projection") else ""
    return "## Time to quality\n\n" + head + "\n\n" + "\n".join(rows) + tail + "\n"


def html_page(out: Mapping[str, Any]) -> bytes:
    """A self-contained page (plotly inlined, opens offline): the summary, then one figure per round."""
    figs = [round_figure(out, r["round"]) for r in out["rounds"] if r["curves"] or r["early_stopping"]]
    figs += [f for f in (tradeoff_figure(r) for r in out["rounds"]) if f is not None]
    parts = [f.to_html(full_html=False, include_plotlyjs="inline" if i == 0 else False) for i, f in enumerate(figs)]
    body = "<pre>" + html.escape(markdown(out)) + "</pre>" + "".join(parts)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Time to quality</title></head>"
            f"<body>{body}</body></html>").encode()


def _prediction(r: Mapping[str, Any]) -> str:
    p, m = r.get("predicted"), r.get("measured") or {}
    if not p:
        return "—"

    def f(x: Any) -> str:
        return "—" if x is None else f"{x:.2f}"

    return (f"{f(p['steps_ratio'])} × {f(p.get('step_time_ratio'))} = {f(p['time_ratio'])} / "
            f"{f(m.get('steps_ratio'))} × {f(m.get('step_time_ratio'))} → {f(m.get('time_ratio'))}")


def _ratio(tt: Mapping[str, Any]) -> str:
    if tt["ratio"] is None:
        return "—"
    if tt["interval"] is None:  # the seeds were one run: no interval, a stated tolerance (the reason says it)
        return f"{tt['ratio']:.2f}× (one run)"
    low, high = tt["interval"]
    return f"{tt['ratio']:.2f}× [{low:.2f}, {'∞' if high is None else f'{high:.2f}'}]"


def _md(text: object) -> str:
    return html.escape(str(text)).replace("|", "\\|")
