"""Which charts an analysis gets, in report order: one list for the HTML export (and anything else that
wants "all the pictures of this analysis"), built from the chart functions of :mod:`reports.charts*`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from advisors.experiments.results.record import LadderRecord
from advisors.experiments.results.stored_view import StoredView
from reports import charts
from reports.charts import compare as charts_compare, over_time as charts_time
from advisors.analysis import Analysis
from reports.compare import Comparison


@dataclass(frozen=True)
class Figure:
    """A titled chart; ``key`` is a stable id (HTML element ids, tests)."""

    key: str
    figure: go.Figure


def analysis_figures(a: Analysis) -> list[Figure]:
    """Every chart that has data to show, in the order a reader needs them."""
    out: list[Figure] = []
    b = a.breakdown
    if b is not None and len(b.per_step):
        out.append(Figure("shares", charts.share_bar(b.shares())))
        out.append(Figure("per_step", charts.step_breakdown(b.per_step)))
        if len(b.ranks) > 1:
            out.append(Figure("per_rank", charts.rank_breakdown(b.per_step)))
            s = b.straggler
            out.append(
                Figure("straggler", charts.straggler(b.per_rank, None if s is None else s.rank))
            )
    if not a.timeline.empty:
        first = int(a.timeline["rank"].min())
        out.append(Figure("timeline", charts_time.timeline(a.timeline, a.step_spans, first)))
    if not a.telemetry.empty:
        source = a.run.telemetry_source if a.run else None
        out.append(Figure("telemetry", charts_time.telemetry(a.telemetry, a.steps, source)))
    if not a.steps.empty:
        out.append(Figure("progress", charts_time.live_progress(a.steps)))
    if not a.memory.empty:
        first = int(a.memory["rank"].min())
        out.append(Figure("memory", charts_time.memory_over_time(a.memory, a.step_spans, first)))
    if a.snapshot is not None:
        out.append(Figure("snapshot", charts.snapshot_memory(a.snapshot, a.device_memory_bytes)))
    if b is not None and len(b.kernels):
        out.append(
            Figure("kernels", charts.top_items(b.kernels, "Top GPU kernels", color_by="kclass"))
        )
    if b is not None and len(b.ops):
        out.append(Figure("ops", charts.top_items(b.ops, "Top host operators (inclusive)")))
    return out


def comparison_figures(c: Comparison) -> list[Figure]:
    """Step time A vs B, breakdown side by side and deltas, kernels and ops that moved most."""
    samples = {f"A: {c.label_a}": c.step_ms_a, f"B: {c.label_b}": c.step_ms_b}
    side = {
        f"A: {c.label_a}": dict(zip(c.categories["category"], c.categories["a_ms"])),
        f"B: {c.label_b}": dict(zip(c.categories["category"], c.categories["b_ms"])),
    }
    out = [
        Figure("cmp_steps", charts_compare.step_time_distributions(samples, "Step time, A vs B")),
        Figure("cmp_breakdown", charts_compare.breakdown_side_by_side(side)),
        Figure("cmp_deltas", charts_compare.category_deltas(c.categories)),
    ]
    if len(c.kernels):
        out.append(
            Figure("cmp_kernels", charts_compare.name_deltas(c.kernels, "Kernels that moved most"))
        )
    if len(c.ops):
        out.append(
            Figure("cmp_ops", charts_compare.name_deltas(c.ops, "Operators that moved most"))
        )
    return out


def experiment_figures(view: StoredView) -> list[Figure]:
    """Before/after of an applied fix, from its stored charts' inputs: step time distributions, breakdown before
    vs after, a memory fix's peaks (from its record), loss curves."""
    ev = view.evidence or {}
    out = [
        Figure(
            "exp_steps",
            charts_compare.step_time_distributions(
                ev.get("step_samples") or {}, "Step time before and after"
            ),
        )
    ]
    if ev.get("breakdowns"):
        out.append(
            Figure(
                "exp_breakdown",
                charts_compare.breakdown_side_by_side(
                    ev["breakdowns"], "Breakdown before vs after"
                ),
            )
        )
    memory = view.record.memory if view.record is not None else None
    if memory is not None and memory.bars():
        out.append(Figure("exp_memory", charts_compare.memory_peaks(memory.bars())))
    if ev.get("loss_curves"):
        same = bool(ev.get("loss_identical"))
        out.append(
            Figure(
                "exp_loss",
                charts_compare.loss_curves(ev["loss_curves"], "Loss curves overlaid", same),
            )
        )
    return out


def ladder_figures(ladder: LadderRecord) -> list[Figure]:
    """The ladder: the running product of the kept speed-ups (when at least one was kept)."""
    steps = pd.DataFrame(ladder.steps, columns=["label", "speedup"])
    return [Figure("ladder", charts_compare.ladder(steps))] if len(steps) > 1 else []


def watch_figures(watch: dict[str, Any] | None) -> list[Figure]:
    """A watched run's whole-run chart with its captures marked (:func:`reports.watch_timeline.watch_extra`)."""
    if not watch or not watch.get("timeline"):
        return []
    from reports.charts.watch import watch_timeline

    return [
        Figure(
            "watch_timeline",
            watch_timeline(pd.DataFrame(watch["timeline"]), watch.get("captures") or []),
        )
    ]
