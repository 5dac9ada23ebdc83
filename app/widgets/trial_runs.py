"""An experiment's trial runs on the Runs page: each A/B trial with its part, numbers and error, and a way to open
one in Analysis (the walk found them visible only from `stepwise list --all`)."""

from __future__ import annotations

import streamlit as st

from advisors.experiments.results.stored_view import read_view
from app.services import tables
from profilers.run.records import RunRecord
from profilers.store import experiments
from profilers.store.runs import RunStore

#: a run's status and measured figures, as the Runs list and an experiment's trials both show them
RUN_FIGURES = {
    "status": st.column_config.TextColumn(width=120),  # an experiment's outcome word and speed-up
    "ms/step": st.column_config.NumberColumn(format="%.1f", width=70),
    "samples/s": st.column_config.NumberColumn(format="%.1f", width=80),
    "peak MiB": st.column_config.NumberColumn(format="%.0f", width=75),
}
TRIAL_COLUMNS = {
    "round": st.column_config.NumberColumn(width=55),
    "fix": st.column_config.TextColumn(width=130),
    "part": st.column_config.TextColumn(width=80),
    "pair": st.column_config.NumberColumn(width=45),
    "run": st.column_config.TextColumn(width=200),
    **RUN_FIGURES,
    "others' cores": st.column_config.NumberColumn(format="%.2f", width=90),
    "created": st.column_config.DatetimeColumn(format="HH:mm:ss", width=80),
    "error": st.column_config.TextColumn(width=120),
}


def show(store: RunStore, experiment: RunRecord) -> None:
    """The trials of ``experiment``, in the order they ran, and a picker that opens one in Analysis."""
    trials = experiments.trials(store, experiment.run_id)
    st.subheader(
        f"Its trials ({len(trials)})"
    )  # not "runs": the page's own title is the heading "Runs"
    if not trials:
        st.caption(
            "No trial run has started yet."
            if not experiment.status.finished
            else "This experiment kept no trial runs."
        )
        return
    seen = (
        read_view(experiments.view(store, experiment.run_id))
        if experiment.status.finished
        else None
    )
    frame = tables.trials_frame(trials, seen.trials if seen is not None else ())
    frame = frame.dropna(
        axis="columns", how="all"
    )  # a running experiment has no rounds or pairs yet
    st.caption(
        "Every run the verdict rests on, in the order they ran: the baseline and patched arms interleave. "
        "The speed-up is the patched arm's samples/s over the baseline's, each the median of the samples/s "
        "of its trials shown here (the pairs the verdict used: a pair other programs competed for may be "
        "left out, and the verdict says so)."
    )
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        key="runs.trials",
        placeholder="—",
        column_order=[c for c in frame.columns if c != "id"],
        column_config=TRIAL_COLUMNS,
    )
    names = {row["id"]: _name(n, row) for n, row in enumerate(frame.to_dict("records"), 1)}
    picked = st.selectbox(
        "Open a trial run",
        list(names),
        format_func=lambda i: names[i],
        index=None,
        key="runs.trial_pick",
        placeholder="Pick a trial to analyse",
    )
    if picked:
        st.page_link(
            "views/analysis.py",
            label="Open it in Analysis",
            icon=":material/bar_chart:",
            query_params={"run": picked},
        )


def _name(n: int, row: dict) -> str:
    """ "#2 patched, 10:16:56, 40.0 ms/step (ok)": the trials of one arm share a label, so each is told apart by
    its place in the order, its time and its number."""
    ms = row.get("ms/step")
    step = f", {ms:.1f} ms/step" if isinstance(ms, (int, float)) and ms == ms else ""
    return f"#{n} {row['part']}, {row['created']:%H:%M:%S}{step} ({row['status']})"
