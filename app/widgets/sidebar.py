"""The sidebar every page shares: the device, live NVML vs host telemetry, and where runs are stored."""

from __future__ import annotations

import streamlit as st

from app.services import environment
from app.data import store
from reports.escape import markdown_text


@st.cache_data(ttl=300, max_entries=1, show_spinner=False)
def _environment() -> environment.Environment:
    return environment.detect()


def render() -> None:
    env = _environment()
    with st.sidebar:
        st.markdown("**Device**")
        st.caption(markdown_text(env.device))
        st.markdown("**Telemetry**")
        if env.nvml_live:
            st.success("NVML live", icon=":material/sensors:")
        else:
            st.warning("Host telemetry (psutil) — NVML not available", icon=":material/memory:")
        st.caption(markdown_text(env.telemetry))
        st.caption(f"Run store: {markdown_text(store().root.resolve())}")
