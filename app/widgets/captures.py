"""A watched run's captures on the Runs page: each one's trigger, steps and status, and a way to open the run it
became in Analysis (they were reachable only by typing ``?run=``)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.widgets import ui
from profilers.run.captures import capture_records
from profilers.run.records import RunRecord


def show(record: RunRecord) -> None:
    """Nothing for a run that captured nothing; else its captures in order and a picker."""
    captures = capture_records(Path(record.run_dir))
    if not captures:
        return
    st.subheader(f"Its captures ({len(captures)})")
    st.caption(
        "The watched run profiled itself when its step time, batch drawing or memory changed: each "
        "capture is a run of its own, analysed like any other."
    )
    rows = [
        {
            "capture": c.get("n"),
            "rank": c.get("rank"),
            "trigger": ui.text(str((c.get("trigger") or {}).get("reason") or "")),
            "steps": "–".join(str(s) for s in c.get("steps") or []),
            "status": c.get("status"),
            "run": c.get("run_id") or "not stored yet",
        }
        for c in captures
    ]
    st.dataframe(rows, hide_index=True, width="stretch", key="runs.captures", placeholder="—")
    stored = {
        c["run_id"]: f"capture {c.get('n')} (rank {c.get('rank')}): "
        f"{(c.get('trigger') or {}).get('kind') or 'capture'}"
        for c in captures
        if c.get("run_id")
    }
    picked = st.selectbox(
        "Open a capture",
        list(stored),
        format_func=lambda i: stored[i],
        index=None,
        key="runs.capture_pick",
        placeholder="Pick a capture to analyse",
    )
    if picked:
        st.page_link(
            "views/analysis.py",
            label="Open it in Analysis",
            icon=":material/bar_chart:",
            query_params={"run": picked},
        )


def pointer(record: RunRecord) -> None:
    """On a watched run's Analysis page: where its profiled steps are (its captures), one link each."""
    stored = [c for c in capture_records(Path(record.run_dir)) if c.get("run_id")]
    if not stored:
        return
    st.info(
        f"This run profiled itself in {len(stored)} capture(s); each is a run of its own with its "
        "trace and breakdown.",
        icon=":material/radio_button_checked:",
    )
    for c in stored:
        st.page_link(
            "views/analysis.py",
            label=f"Capture {c.get('n')} (rank {c.get('rank')}): "
            f"{(c.get('trigger') or {}).get('kind') or 'capture'}, steps "
            + "–".join(str(s) for s in c.get("steps") or []),
            icon=":material/bar_chart:",
            query_params={"run": c["run_id"]},
        )
