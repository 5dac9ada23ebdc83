"""The live view of a run: progress bar, step time and loss, telemetry; refreshed by an ``st.fragment``."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app import data, state

from app.services import launching

from app.widgets import ui
from profilers.errors import StepwiseError
from profilers.run.records import RunStatus
from profilers.run.step_records import timeline
from reports.charts import over_time as charts_time
from reports.charts import watch as watch_chart
from reports.watch_timeline import is_watched, judged_captures

REFRESH_S = 1.0
NO_STEPS_YET = "Step time and loss are drawn here from the run's first step."


def _body(run_id: str) -> None:
    store = data.store()
    live = launching.live(store, run_id)
    if live.status is not RunStatus.RUNNING and state.live_was_running():
        # The run has ended: rerun the whole page first, which stops the auto-refresh. "Run finished" and its
        # links are drawn only by that full run, so a click on them never races a rerun still to come (a
        # click landing between this fragment and the page rerun was overridden by it: the link did nothing).
        state.set_live_was_running(False)
        st.rerun(scope="app")
    p = live.progress or {}
    total, done = int(p.get("total_steps") or 0), int(p.get("step") or 0)
    # before the run reports its first step it has no step count to show: say it is starting, not "of ?"
    where = (
        f"step {done} of {total}"
        if total
        else f"step {done}"
        if done
        else "starting (Python and torch load)"
    )
    if live.status is RunStatus.RUNNING and live.cancelled:
        st.progress(min(done / total, 1.0) if total else 0.0, text=f"{where} · stopping")
        st.info(
            ui.text(live.cancelled[:1].upper() + live.cancelled[1:])
            + ". The run is stopping; it is stored "
            "as killed, with every step it did.",
            icon=":material/stop_circle:",
        )
    elif live.status is RunStatus.RUNNING:
        eta = p.get("eta_s")
        st.progress(
            min(done / total, 1.0) if total else 0.0,
            text=where + (f" · about {eta:.0f} s left" if eta else ""),
        )
        if st.button("Cancel run", key="launch.cancel", type="secondary"):
            try:
                launching.cancel(store, run_id, state.launch_handle())
                st.rerun()  # at once: the countdown must stop with the click
            except StepwiseError as err:
                st.error(ui.text(err))
    else:
        show = (
            st.success
            if live.status is RunStatus.OK
            else (st.info if live.cancelled else st.warning)
        )
        show(ui.text(live.outcome, 1500))
        state.select_run(run_id)
        cols = st.columns(3)
        cols[0].page_link(
            "views/analysis.py", label="Open its analysis", icon=":material/bar_chart:"
        )
        cols[1].page_link("views/advisor.py", label="Ask the advisor", icon=":material/lightbulb:")
    run_dir = store.path(run_id)
    found = judged_captures(run_dir) if is_watched(run_dir) else None
    if live.steps.empty:  # no empty axes while Python and torch load
        st.caption(NO_STEPS_YET)
    elif found is not None:  # a watched run: the whole run (roll-ups included), each capture marked
        ui.chart(watch_chart.watch_timeline(timeline(run_dir), found), key="launch.watch_timeline")
    else:
        ui.chart(charts_time.live_progress(live.steps), key="launch.live_progress")
    if found is not None:
        captures(store, run_id, found, live.status is RunStatus.RUNNING)
    if not live.telemetry.empty:
        source = str(live.telemetry["source"].iloc[0]) if "source" in live.telemetry else None
        ui.chart(
            charts_time.telemetry(live.telemetry, live.steps, source), key="launch.live_telemetry"
        )


def captures(store: Any, run_id: str, found: list[dict[str, Any]], running: bool) -> None:
    """A watched run's captures, each with its verdict (its stored analysis, made once, outside the training
    process: :func:`reports.watch_timeline.judged_captures`), and the button that asks for one now."""
    from profilers.run.captures import request_capture

    st.markdown("**Captures** — the run profiles itself when its step changes")
    for capture in found:
        if capture["verdict"] is not None:
            st.markdown(ui.text(capture["verdict"], 1500))
    if not found:
        st.caption(
            "No capture yet: the step time, batch drawing and memory have kept to their baseline."
        )
    if running and st.button("Capture the next steps now", key="launch.capture"):
        try:
            request_capture(store, run_id)
            st.toast("Asked: the next steps are profiled within about a second.")
        except StepwiseError as err:
            st.error(ui.text(err))


def render(run_id: str) -> None:
    """Follow ``run_id``: auto-refreshing while it runs, static once it has ended."""
    running = data.store().get(run_id).status is RunStatus.RUNNING
    state.set_live_was_running(running)

    @st.fragment(run_every=REFRESH_S if running else None)
    def _live() -> None:
        _body(run_id)

    _live()
