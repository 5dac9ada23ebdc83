"""Small rendering helpers the pages share: the run picker, safe text, charts, loading an analysis."""

from __future__ import annotations

import time

import plotly.graph_objects as go
import streamlit as st

from app import data, state
from app.widgets import links
from profilers.errors import StepwiseError
from profilers.run.records import RunRecord, RunStatus
from advisors.analysis import Analysis, with_device_memory
from reports.escape import markdown_text
from stepwise_agent import steady


def describe_run(r: RunRecord) -> str:
    """One line for a selectbox (plain text: Streamlit does not render Markdown there)."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created_unix))
    step = f" · {step_time(r.step_time_ms)}/step" if r.step_time_ms else ""
    return f"{r.label} · {r.kind} · {r.status.value} · {when}{step}"


def step_time(ms: float | None) -> str:
    """A run's step time as every page shows it (same rounding on Runs, Analysis, Compare and in pickers)."""
    return f"{ms:.1f} ms" if ms is not None else "—"


def step_time_help(a: Analysis) -> str:
    """What the shown step time is, the typical step when apart from it, and the profiled window's
    own median when it differs."""
    profiled = a.profiled_step_time_ms
    run = a.run
    typical = (
        steady.typical_note(a.step_time_ms, run.typical_step_ms, run.stalled_share) if run else ""
    )
    extra = (
        f" The profiled window's own median step: {profiled:.1f} ms (profiler overhead included)."
        if profiled is not None
        and a.step_time_ms is not None
        and round(profiled, 1) != round(a.step_time_ms, 1)
        else ""
    )
    said = f" {typical[:1].upper()}{typical[1:]}." if typical else ""
    return f"The {a.step_time_basis}.{extra}{said}"


def text(value: object, limit: int | None = None) -> str:
    """A trace- or user-derived string as literal Markdown."""
    return markdown_text(value, limit)


def chart(fig: go.Figure, key: str | None = None) -> None:
    st.plotly_chart(fig, width="stretch", key=key, theme=None, config={"displaylogo": False})


def run_picker(
    records: list[RunRecord],
    key: str,
    label: str = "Run",
    default: str | None = None,
    remember: bool = True,
) -> RunRecord | None:
    """A selectbox of runs; with ``remember`` the choice becomes the session's selected run (shared by the
    Analysis, Advisor and Report pages)."""
    if not records:
        st.info("No runs yet: launch a sample workload or upload a trace.")
        st.page_link("views/upload.py", label="Upload a trace", icon=":material/upload:")
        st.page_link("views/launch.py", label="Launch a run", icon=":material/play_arrow:")
        return None
    by_id = {r.run_id: r for r in records}
    ids = list(by_id)
    wanted = default or state.selected_run()
    if not remember:
        choice = st.selectbox(
            label,
            ids,
            index=ids.index(wanted) if wanted in by_id else 0,
            format_func=lambda i: describe_run(by_id[i]),
            key=key,
        )
        return by_id[choice]
    # The session's selected run drives the widget (a deep link, a clicked row or a finished launch may have
    # changed it since the widget last drew); a pick in the widget changes it first, through on_change.
    wanted = wanted if wanted in by_id else ids[0]
    if st.session_state.get(key) != wanted:
        st.session_state[key] = wanted
    choice = st.selectbox(
        label,
        ids,
        format_func=lambda i: describe_run(by_id[i]),
        key=key,
        on_change=lambda: state.select_run(st.session_state[key]),
    )
    state.select_run(choice)
    links.show(choice)
    return by_id[choice]


def load_analysis(record: RunRecord) -> Analysis | None:
    """The run's analysis, or None after showing a clear error (the page keeps working)."""
    try:
        analysis = data.run_analysis(record, state.upload_digest(record.run_id))
        return with_device_memory(analysis, state.device_memory(record.run_id))
    except StepwiseError as err:
        st.error(f"{text(record.label)} cannot be analysed: {text(err)}")
    except MemoryError:
        st.error(f"{text(record.label)} needs more memory than this machine has.")
    return None


def selected_analysis(key: str) -> tuple[RunRecord | None, Analysis | None]:
    """Pick a run (widget ``key``) and load its analysis. A trial run of an experiment, opened from the Runs
    page or a ``?run=`` link, is offered too while it is the selected run (the pickers list no trials)."""
    records = data.analysable_runs()
    wanted = state.selected_run()
    if wanted and all(r.run_id != wanted for r in records):
        try:
            trial = data.store().get(wanted)
        except StepwiseError:
            trial = None
        if trial is not None and trial.parent and trial.kind != "experiment":
            records = [trial, *records]
    record = run_picker(records, key)
    if record is None:
        return None, None
    if record.status is RunStatus.RUNNING:
        st.info(
            "This run is still training: its figures fill in as it goes and are final when it ends."
        )
    return record, load_analysis(record)
