"""Events: zoom into any window of a trace (re-bucketed on the server), see the events of a small window one by
one, export the trace or the window for Perfetto; for a memory snapshot, memory over time and the top stacks."""

from __future__ import annotations

import streamlit as st

from app import data
from app.widgets import event_panels, ui

st.title("Events")
record = ui.run_picker(data.store().list(), "events.run")
if record is not None:
    if data.is_snapshot(record):
        event_panels.snapshot_view(record)
    else:
        event_panels.trace_view(record)
