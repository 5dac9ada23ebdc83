"""Upload: drop Kineto / PyTorch Profiler traces; each readable one becomes a run, each bad one gets a message."""

from __future__ import annotations

import streamlit as st

from app import data, state

from app.widgets import ui

from app.services import uploads
from profilers import inputs
from reports import charts

st.title("Upload traces")
limit_mb = int(st.get_option("server.maxUploadSize"))
st.markdown(
    f"Drop any of these — {inputs.describe_uploads()}. "
    f"**Size limit: {limit_mb} MB per file** (the server's `server.maxUploadSize`). "
    "A file that is not a readable trace is refused with the reason and nothing is stored."
)
as_job = st.toggle(
    "The files I drop are the ranks of one job",
    key="upload.as_job",
    help="Off: each file becomes its own run. On: all files together become one multi-rank run.",
)
job_name = (
    st.text_input("Job name", value="multi-rank job", key="upload.job_name") if as_job else None
)
files = st.file_uploader(
    "Trace files", type=inputs.upload_types(), accept_multiple_files=True, key="upload.files"
)

seen = state.upload_seen()
new = [f for f in files or [] if f.file_id not in seen]
if new:
    store = data.store()
    groups = [new] if as_job else [[f] for f in new]
    outcomes = []
    for group in groups:
        outcome = uploads.store_upload(
            store, group, data.checked_upload, job_name=job_name if as_job else None
        )
        if outcome.run_id and outcome.digest:
            state.remember_upload_digest(outcome.run_id, outcome.digest)
        outcomes.append(outcome)
        seen.update(f.file_id for f in group)
    state.upload_results()[:0] = outcomes
    stored = [o for o in outcomes if o.ok]
    if len(outcomes) == 1 and stored:
        state.select_run(stored[0].run_id)
        st.switch_page("views/analysis.py")

# The colour key also loads the browser's chart library while a file is chosen: the analysis then draws at once.
ui.chart(charts.category_key(), key="upload.key")

for outcome in state.upload_results()[:20]:
    (st.success if outcome.ok else st.error)(uploads.describe(outcome))
if any(o.ok for o in state.upload_results()):
    st.page_link("views/runs.py", label="See them in the run list", icon=":material/list:")
