"""Advisor: the binding bottleneck in one sentence, its evidence and fix; for launched runs, Apply the fix."""

from __future__ import annotations

import streamlit as st

from app.widgets import advisor_panels

from app.widgets import experiment_view

from app.widgets import quality_panels

from app.widgets import ui

st.title("Advisor")
if (
    quality_panels.linked()
):  # a link to a time-to-quality result (from the Runs page): that result first
    quality_panels.render()
record, analysis = ui.selected_analysis("advisor.run")
if analysis is not None and record is not None:
    advisor_panels.diagnosis(analysis)
    st.divider()
    experiment_view.render(record, analysis)
if not quality_panels.linked():
    quality_panels.render()
