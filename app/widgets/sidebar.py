"""The sidebar every page shares: the device, live NVML vs host telemetry (one line; the why in an expander),
and where runs are stored."""

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
        line = "NVML live" if env.nvml_live else "Host telemetry (psutil): NVML not available"
        st.caption(f"**Telemetry:** {line}")
        with st.expander("Telemetry details"):
            st.caption(markdown_text(env.telemetry))
        st.caption(f"Run store: {markdown_text(store().root.resolve())}")
