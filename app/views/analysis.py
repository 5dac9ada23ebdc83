"""Analysis: where the step time of one run or trace goes — by step, by rank, over time, by kernel and op."""

from __future__ import annotations

import streamlit as st

from app import analysis_panels as panels
from app import ui

st.title("Analysis")
record, analysis = ui.selected_analysis("analysis.run")
if analysis is not None:
    panels.headline(analysis)
    panels.notes(analysis)
    if analysis.breakdown is None:
        st.warning("No trace to break down for this run; its measured steps and telemetry are below.")
        panels.telemetry_panel(analysis)
    else:
        tabs = st.tabs(["Breakdown", "Timeline", "Kernels & operators", "Telemetry & memory", "Ranks"])
        with tabs[0]:
            panels.breakdown_panel(analysis)
        with tabs[1]:
            panels.timeline_panel(analysis)
        with tabs[2]:
            panels.tables_panel(analysis)
        with tabs[3]:
            panels.telemetry_panel(analysis)
        with tabs[4]:
            panels.ranks_panel(analysis)
