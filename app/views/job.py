"""Job: a folder of many ranks on this machine, read as map and reduce — a rank × step heat map of step time and
of exposed communication, the straggler and who waits on it, the collectives; one rank's trace opened on its own.
No page ever holds every rank's events: the job is its ranks' summaries (cached in Stepwise's own cache, never
beside the traces)."""

from __future__ import annotations

import streamlit as st

from app.widgets import job_panels

st.title("Job")
st.caption("A folder of per-rank traces on this machine (a shared job folder, say): each rank is read on its own "
           "into a small summary, kept in Stepwise's own cache (never beside the traces), so a second look takes "
           "seconds.")
if "folder" in st.query_params and "job.folder" not in st.session_state:  # a link from an upload's pages
    st.session_state["job.folder"] = st.query_params["folder"]
folder = st.text_input("Folder of rank traces", key="job.folder", placeholder="/shared/job/traces")
if folder:
    job_panels.job_view(folder.strip())
