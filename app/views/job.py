"""Job: a folder of many ranks on this machine, read as map and reduce — a rank × step heat map of step time and
of exposed communication, the straggler and who waits on it, the collectives; one rank's trace opened on its own.
Or a watched run of several ranks (``?run=RUN_ID``): each rank's step time and own work over the whole run, its
captures marked.
No page ever holds every rank's events: the job is its ranks' summaries (cached in Stepwise's own cache, never
beside the traces)."""

from __future__ import annotations

import streamlit as st

from app.widgets import job_panels

st.title("Job")
st.caption(
    "A folder of per-rank traces on this machine (a shared job folder, say): each rank is read on its own "
    "into a small summary, kept in Stepwise's own cache (never beside the traces), so a second look takes "
    "seconds."
)
if (
    "folder" in st.query_params and "job.folder" not in st.session_state
):  # a link from an upload's pages
    st.session_state["job.folder"] = st.query_params["folder"]
if "run" in st.query_params and "job.run" not in st.session_state:  # a link from a watched run
    st.session_state["job.run"] = st.query_params["run"]
run_id = st.text_input(
    "…or a watched run of several ranks (its id)", key="job.run", placeholder="20261128-…"
)
if run_id:
    job_panels.watched_ranks_panel(run_id.strip())
folder = st.text_input("Folder of rank traces", key="job.folder", placeholder="/shared/job/traces")
if folder:
    job_panels.job_view(folder.strip())
