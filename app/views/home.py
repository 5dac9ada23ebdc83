"""The root URL: what Stepwise does, in one sentence, and the three ways in (launch a workload, profile your own
script, upload a trace). A link with a query (``/?run=<id>``) hands over to the Runs page with it
(``/runs?run=<id>``), so an old link still opens its run."""

from __future__ import annotations

import streamlit as st

from app import data

if st.query_params.to_dict():
    st.switch_page("views/runs.py", query_params=st.query_params.to_dict())

st.title("Stepwise")
st.markdown(
    "**Stepwise profiles a PyTorch training run, names what limits its step time — data, memory, compute, "
    "communication or the host — then applies a fix and measures whether it helped.**"
)
st.markdown("Three ways in:")
cols = st.columns(3)
with cols[0].container(border=True):
    st.markdown("##### Launch a sample workload")
    st.caption(
        "A built-in training job with knobs (batch size, workers, precision…): see a bottleneck and its fix "
        "in a minute."
    )
    st.page_link("views/launch.py", label="Launch a workload", icon=":material/play_arrow:")
with cols[1].container(border=True):
    st.markdown("##### Profile your own script")
    st.caption(
        "Your training script runs unmodified in your interpreter; Stepwise profiles some steps and stops."
    )
    st.page_link(
        "views/launch.py",
        label="Profile my script",
        icon=":material/code:",
        query_params={"what": "script"},
    )
with cols[2].container(border=True):
    st.markdown("##### Upload a trace")
    st.caption(
        "A PyTorch profiler / Kineto trace (.json, .json.gz, a folder of ranks as .zip) or a memory "
        "snapshot: a verdict in seconds."
    )
    st.page_link("views/upload.py", label="Upload a trace", icon=":material/upload:")
n = len(data.listed_runs())
if n:
    st.page_link(
        "views/runs.py",
        label=f"Or open one of the {n} stored run{'' if n == 1 else 's'}",
        icon=":material/list:",
    )
