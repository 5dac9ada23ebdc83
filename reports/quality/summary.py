"""A time-to-quality experiment in words: the Markdown summary and the self-contained HTML page, rendered from its
one stored record (:class:`~advisors.experiments.results.quality_record.QualityRecord`) — the same numbers as the
Advisor page's panel and ``--json``'s ``record``; the page adds the figures drawn from the runs' curves."""

from __future__ import annotations

import html
from typing import Any, Mapping

from advisors.experiments.results.quality_record import QualityRecord, QualityRoundRecord
from reports.quality.figures import round_figure, tradeoff_figure

TIMED = ("kept", "rejected", "inconclusive")


def markdown(rec: QualityRecord) -> str:
    """The experiment in Markdown (every name escaped by the table's plain text)."""
    rows = [
        "| round | change | rule | time to target (before → after) | ratio [interval] | predicted / measured "
        "(steps × step time = time, after ÷ before) | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rec.rounds:
        rows.append(
            f"| {r.round} | {_md(r.title)} | {_md(r.rule)} | {_md(cell(r))} | {r.ratio_text} | "
            f"{_md(r.prediction_text or '—')} | {r.outcome} |"
        )
    head = f"**Target:** {_md(rec.target)}; {rec.seeds} seed(s) per arm; budget {_md(rec.budget or '?')} per arm."
    if rec.one_run:
        head += (
            f"\n\n**The {rec.seeds} seeds are one run:** the baseline's seeds gave the same curve (the script's "
            "seed could not be varied); verdicts use a stated tolerance, not a spread of seeds."
        )
    if rec.noise:
        head += "\n\n**Gradient noise scale:** " + _md(rec.noise)
    if rec.floor:
        head += "\n\n**A target on the floor:** " + _md(rec.floor)
    tail = "".join(
        f"\n\n**{_md(r.title)}:** {_md(r.reason)}"
        for r in rec.rounds
        if r.tradeoff is not None or r.outcome == "inconclusive"
    )
    tail += f"\n\n{_md(rec.projection)}" if rec.projection else ""
    return "## Time to quality\n\n" + head + "\n\n" + "\n".join(rows) + tail + "\n"


def cell(r: QualityRoundRecord) -> str:
    """What a round measured, in a table cell: each arm's time to target, early stopping's saving, or why not."""
    if r.saved_s is not None:
        return f"saves {r.saved_s:.2f} s ({r.saved_share or 0:.0%})"
    if r.not_applied is not None:
        return f"not applied: {r.not_applied}"
    if r.outcome in TIMED:

        def arm(s: float | None) -> str:
            return "failed" if s is None else f"{s:.2f} s"

        return f"{arm(r.before_s)} → {arm(r.after_s)}"
    return "advice"


def html_page(rec: QualityRecord, out: Mapping[str, Any]) -> bytes:
    """A self-contained page (plotly inlined, opens offline): the record's summary, then one figure per round
    (from the runs' curves in ``out``, the JSON report)."""
    figs = [
        round_figure(out, r["round"]) for r in out["rounds"] if r["curves"] or r["early_stopping"]
    ]
    figs += [f for f in (tradeoff_figure(r) for r in out["rounds"]) if f is not None]
    parts = [
        f.to_html(full_html=False, include_plotlyjs="inline" if i == 0 else False)
        for i, f in enumerate(figs)
    ]
    # the Markdown escapes its names for a Markdown renderer: unescaped once first, or the page shows "&#x27;"
    body = "<pre>" + html.escape(html.unescape(markdown(rec))) + "</pre>" + "".join(parts)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Time to quality</title></head>"
        f"<body>{body}</body></html>"
    ).encode()


def _md(text: object) -> str:
    return html.escape(str(text)).replace("|", "\\|")
