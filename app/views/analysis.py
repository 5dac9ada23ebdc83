"""Analysis: where the step time of one run or trace goes — by step, by rank, over time, by kernel and op, by
module of the model."""

from __future__ import annotations

import streamlit as st

from app.widgets import analysis_panels as panels
from app.widgets.layers import layers_panel
from app import state
from app.widgets import captures, ui

st.title("Analysis")
record, analysis = ui.selected_analysis("analysis.run")
if analysis is not None:
    panels.headline(analysis)
    panels.notes(analysis)
    if (
        record is not None
    ):  # a run that carried the noise-scale meter (a --to-quality arm): its goodput numbers
        from app.widgets.quality_panels import run_noise_panel

        run_noise_panel(record.run_dir)
    if analysis.snapshot is not None and record is not None:
        panels.snapshot_panel(analysis, record.run_id)
    elif analysis.breakdown is None:
        st.warning(
            "No trace to break down for this run; its measured steps and telemetry are below."
        )
        if record is not None:  # a watched run profiles itself in captures, each a run of its own
            captures.pointer(record)
        panels.telemetry_panel(analysis)
    else:
        # Lazy tabs: only the open tab runs and sends its charts, so a large trace stays fluid.
        panes = {
            "Breakdown": panels.breakdown_panel,
            "Timeline": panels.timeline_panel,
            "Kernels & operators": panels.tables_panel,
            "Telemetry & memory": panels.telemetry_panel,
            "Ranks": panels.ranks_panel,
            "Layers": layers_panel,
        }
        for tab, render in zip(
            st.tabs(list(panes), key=state.ANALYSIS_TAB, on_change="rerun"), panes.values()
        ):
            if tab.open is not False:
                with (
                    tab,
                    st.spinner("Drawing…"),
                ):  # never a blank tab: a spinner while its charts are built
                    render(analysis)
