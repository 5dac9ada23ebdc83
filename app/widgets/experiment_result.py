"""A stored experiment on the Advisor page: its live progress while it runs (any session, after a reload or a
restart), then its stored result — before/after or the ladder — and its stored reports. Renders views
(:mod:`reports.experiment_view`) read from the store, never a job in memory."""

from __future__ import annotations

import time
from typing import Any, Callable

import pandas as pd
import streamlit as st

from advisors.experiments.progress import Progress
from app.widgets import ui
from profilers.run.records import RunRecord, RunStatus
from profilers.store import experiments
from profilers.store.runs import RunStore
from reports import charts_compare
from reports.export import FORMATS

POLL_S = 1.0


def follow(store: RunStore, record: RunRecord, show: Callable[[dict[str, Any]], None]) -> None:
    """Poll the stored experiment while it runs; once it has ended, rerun the page once, then show its view."""
    polling = record.status is RunStatus.RUNNING
    about = experiments.about(store, record.run_id)
    name = "ladder" if about.get("mode") == "ladder" else "experiment"
    title = about.get("fix_title") or about.get("fix")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.created_unix))
    st.caption(ui.text(f"{'Ladder' if name == 'ladder' else 'Apply'}{f': {title}' if title else ''} · started {when}"))

    @st.fragment(run_every=POLL_S if polling else None)
    def _poll() -> None:
        now = store.get(record.run_id)
        if now.status is RunStatus.RUNNING:
            p = Progress.from_dict(experiments.progress(store, record.run_id))
            st.progress(p.fraction, text=f"{p.describe} · {time.time() - now.created_unix:.0f} s")
        elif polling:
            st.rerun(scope="app")
        elif now.status is not RunStatus.OK:
            st.error(f"The {name} stopped ({now.status.value}): {ui.text(now.error or 'no reason stored', 2000)}")
        else:
            view = experiments.view(store, record.run_id)
            if view is None:
                st.warning(f"The {name} ended but its result could not be read back.")
            else:
                show(view)
        n = len(experiments.trials(store, record.run_id))
        st.caption(f"Stored as {ui.text(record.run_id)} with {n} trial run{'' if n == 1 else 's'} (hidden from "
                   "the run list; `python -m profilers list --all` shows them).")

    _poll()


def before_after(view: dict[str, Any]) -> None:
    s, bound = view["summary"], view.get("upper_bound")
    if s.get("not_applied"):
        st.info(ui.text(view["reason"], 600), icon=":material/block:")
        st.caption("The fix never acted in the patched run, so no speed-up was judged: this is not a \"no gain\" "
                   "verdict.")
    else:
        (st.success if view["kept"] else st.warning)(ui.text(view["reason"], 600))
    cols = st.columns(4 if bound else 3)
    paired = "geometric mean over the paired runs of each run's samples/s (what the ratio divides)"
    cols[0].metric("Before (samples/s)", _rate(s.get("before_samples_per_s")), help=paired)
    cols[1].metric("After (samples/s)", _rate(s.get("after_samples_per_s")), help=paired)
    if s.get("speedup"):
        cols[2].metric("Throughput ratio", f"{s['speedup']:.2f}×", help=f"After over before, {s['level']:.0%} "
                       f"interval [{s['low']:.2f}, {s['high']:.2f}]")
    if bound:
        cols[-1].metric("Upper bound", f"{bound:.2f}×",
                        help="The diagnosis' bound on this fix: the speed-up if the time at stake vanished entirely "
                             "(1 / (1 − share)). The measured ratio is read against it.")
    if s.get("before_ms") and s.get("after_ms"):
        st.caption(f"Median step (median over runs of each run's median step): {s['before_ms']:.1f} ms before, "
                   f"{s['after_ms']:.1f} ms after, {s['median_ratio']:.2f}× by medians. The throughput ratio "
                   "divides total samples by total time, so steps of unequal length or a changed batch move it "
                   "differently from the medians.")
    st.caption(("Injected at boot (your file was not written): " if s.get("injected") else "Spec change: ")
               + ui.text(", ".join(f"{k} = {v}" for k, v in s["spec_change"].items()) or "none"))
    ui.chart(charts_compare.step_time_distributions(view["step_samples"], "Step time before and after (every "
                                                    "measured step of every run pooled; box = interquartile range)"),
             key="advisor.before_after")
    left, right = st.columns(2)
    with left:
        if view["breakdowns"]:
            ui.chart(charts_compare.breakdown_side_by_side(view["breakdowns"], "Breakdown before vs after"),
                     key="advisor.bd")
    with right:
        if view["loss_curves"]:
            ui.chart(charts_compare.loss_curves(view["loss_curves"], "Loss curves overlaid"), key="advisor.loss")
    change = view.get("script_change")
    if change is not None:
        if view["kept"]:
            change_block(change["where"], change["change"])
        elif change["where"]:
            st.caption(f"Where the change would go in your code: {ui.text(change['where'])}.")


def ladder(view: dict[str, Any]) -> None:
    st.markdown(f"Total measured speed-up of the kept fixes: **{view['total_speedup']:.2f}×**")
    steps = pd.DataFrame(view["steps"], columns=["label", "step_ms"])
    if len(steps) > 1:
        ui.chart(charts_compare.ladder(steps), key="advisor.ladder_chart")
    st.dataframe(pd.DataFrame(view["rows"]), hide_index=True, width="stretch")
    for c in view["changes"]:
        if c["verdict"] == "kept":
            st.markdown(f"Round {c['round']}: **{ui.text(c['fix'])}** kept")
            change_block(c["where"], c["change"])
        elif c["verdict"] == "not applied":
            st.info(f"Round {c['round']}: **{ui.text(c['fix'])}** — {ui.text(c['reason'], 600)}",
                    icon=":material/block:")
    for a in view["advice"]:
        st.warning(f"**{ui.text(a['fix'])}** — {ui.text(a['why'])}", icon=":material/edit:")
        st.code(a["snippet"], language="python")


def change_block(where: str | None, change: dict[str, Any] | None) -> None:
    """The edit for a kept fix: file:line, then the unified diff (or the snippet to place there)."""
    if where:
        st.markdown(f"**The change to make** at {ui.text(where)}:")
    else:
        st.markdown("**The change to make** (no single place in your code: once, at start-up):")
    if change:
        st.code(change["text"], language="diff" if change["kind"] == "diff" else "python")


def downloads(store: RunStore, source: RunRecord, experiment: RunRecord, what: str, key: str) -> None:
    """The source run's report with this result in it, in every format, as stored when it finished."""
    cols = st.columns(3)
    for col, fmt in zip(cols, ("html", "md", "json")):
        body = experiments.report(store, experiment.run_id, fmt)
        if body is not None:
            col.download_button(f"Report with this {what} ({fmt.upper()})", key=f"{key}.{fmt}", data=body,
                                file_name=f"stepwise-{source.run_id}-{what}.{fmt}", mime=FORMATS[fmt],
                                on_click="ignore", icon=":material/download:")


def _rate(value: float | None) -> str:
    return f"{value:,.1f}" if value else "—"
