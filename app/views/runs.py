"""Runs: every launched run and uploaded trace in the store, newest first; pick one to analyse."""

from __future__ import annotations

import streamlit as st

from app import data, state

from app.services import tables

from app.widgets import captures, experiment_result, links, trial_runs, ui
from profilers.errors import StepwiseError
from profilers.run.records import RunStatus

RUNS_COLUMNS = {  # with the row's selection box, the widths fill the page's main column and no more
    "run": st.column_config.TextColumn(width=150),
    "kind": st.column_config.TextColumn(width=65),
    **trial_runs.RUN_FIGURES,
    "created": st.column_config.DatetimeColumn(format="MMM D, HH:mm", width=95),
    "bottleneck": st.column_config.TextColumn(
        width=95,
        help="the binding bottleneck of the run's analysis (blank until the run is first analysed)",
    ),
    "device": st.column_config.TextColumn(width=55),
    "ranks": st.column_config.NumberColumn(width=45),
    "error": st.column_config.TextColumn(width=50),
}

st.title("Runs")
st.caption(
    "Launched runs and uploaded traces share this list. Pick one to analyse, advise on, compare or export."
)

store = data.store()
store.recover()  # settles runs whose process is gone (e.g. after a dashboard restart): cheap and idempotent
records = data.listed_runs()  # an experiment is one entry; its trial runs are inside it
if records:
    # a run's figures and bottleneck from its stored analysis (the very value its pages show), when it has one
    frame = tables.runs_frame(
        records, data.experiment_outcomes(records), data.stored_headlines(records)
    )
    ids = list(frame["id"])

    def _row_clicked() -> (
        None
    ):  # a click on a row (its box or any cell) selects that run, before the picker draws
        selection = st.session_state["runs.table"].selection
        rows = list(selection.get("rows", [])) + [cell[0] for cell in selection.get("cells", [])]
        if rows and 0 <= rows[0] < len(ids):
            state.select_run(ids[rows[0]])

    # Fits the page: narrow columns so device, ranks, error and id stay in view, a dash for what a run
    # does not have (never "None"), the id under the picker.
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        key="runs.table",
        on_select=_row_clicked,
        selection_mode=["single-row", "single-cell"],
        placeholder="—",
        column_order=[c for c in frame.columns if c != "id"],
        column_config=RUNS_COLUMNS,
    )
record = ui.run_picker(records, key="runs.pick", label="Selected run")
if record is not None:
    st.caption(f"Run id: {ui.text(record.run_id)} (what `stepwise list` and `?run=` links name)")
if record is not None and record.kind == "experiment":
    source = record.source_run
    if source:
        # its outcome word
        said = data.experiment_outcomes([record]).get(record.run_id, record.status.value)
        st.info(
            f"{ui.text(record.label)}: an experiment ({ui.text(said)}). Its result is on the Advisor page "
            "of the run it was started from.",
            icon=":material/science:",
        )
        st.page_link(
            "views/advisor.py",
            label="Open its result",
            icon=":material/lightbulb:",
            query_params={"run": source},
        )
    else:  # started on the command line from a spec or a script: no run of this list to open it on
        experiment_result.from_command_line(store, record)
    trial_runs.show(store, record)
elif record is not None:
    cols = st.columns(4)
    cols[0].page_link("views/analysis.py", label="Analysis", icon=":material/bar_chart:")
    cols[1].page_link("views/advisor.py", label="Advisor", icon=":material/lightbulb:")
    cols[2].page_link("views/compare.py", label="Compare", icon=":material/compare_arrows:")
    cols[3].page_link("views/report.py", label="Report", icon=":material/description:")
    if record.error:
        st.error(ui.text(record.error, 2000))
    captures.show(record)
    with st.expander("Delete this run"):
        confirm = st.checkbox("Yes, delete it and its files", key="runs.confirm_delete")
        if st.button(
            "Delete", disabled=not confirm or record.status is RunStatus.RUNNING, key="runs.delete"
        ):
            try:
                store.delete(record.run_id)
                state.select_run(None)
                links.show(None)  # the address must not keep naming the deleted run
                st.rerun()
            except StepwiseError as err:
                st.error(ui.text(err))
