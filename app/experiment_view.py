"""Apply the advised fix to a launched run: an A/B experiment with progress, then before/after charts."""

from __future__ import annotations

import streamlit as st

from profilers.run_model import RunRecord
from reports.analysis import Analysis


def render(record: RunRecord, analysis: Analysis) -> None:
    st.subheader("Apply the fix")
    if record.kind != "run":
        st.caption("Apply needs a run launched from a sample workload (its spec can be patched); for an uploaded "
                   "trace or your own script, the fix's code snippet above is the change to make.")
        return
    st.info("advisor not available yet: the experiment runner (advisors.experiment) has not landed in this build.")
