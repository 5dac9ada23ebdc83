"""Report: export one run or trace as a self-contained HTML file, JSON or Markdown (optionally vs another run)."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

import streamlit as st

from app import data

from app.widgets import ui
from reports import export
from reports.compare import compare
from reports.run_report.context import report_extra

st.title("Report")
st.markdown(
    "One **HTML** file with interactive charts that opens anywhere, offline (plotly.js is inside it and "
    "every name from the trace is plain text); **JSON** for tools; **Markdown** for tickets, chats and pull "
    "requests. Each includes the experiments tried on the run, the commands to reproduce them and the "
    "environment it ran in."
)
record, analysis = ui.selected_analysis("report.run")
if analysis is not None and record is not None:
    comparison = None
    others = [r for r in data.analysable_runs() if r.run_id != record.run_id]
    if others and st.checkbox(
        "Add a comparison with another run (this run is A)", key="report.with_compare"
    ):
        other = ui.run_picker(others, "report.compare_to", "B", remember=False)
        other_analysis = ui.load_analysis(other) if other is not None else None
        if other_analysis is not None:
            comparison = compare(analysis, other_analysis)
    # one report per run: the experiments tried on it (outcome, gain, change), each arm's command, environment;
    # the very function `analyze RUN --report` calls, so the two doors write the same report
    extra = report_extra(Path(record.run_dir), data.store())
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", record.label)[:60].strip("._") or "report"
    cols = st.columns(3)
    for col, (fmt, title) in zip(
        cols, (("html", "HTML report"), ("json", "JSON"), ("md", "Markdown"))
    ):
        col.download_button(
            f"Download {title}",
            data=partial(export.render, analysis, fmt, comparison, extra=extra),
            file_name=f"stepwise-{stem}.{fmt}",
            mime=export.FORMATS[fmt],
            key=f"report.{fmt}",
            on_click="ignore",
            icon=":material/download:",
            type="primary" if fmt == "html" else "secondary",
        )
    st.caption("The same export from the command line: `stepwise analyze PATH --report out.html`.")
    with st.expander("Preview (Markdown)"):
        st.markdown(export.render(analysis, "md", comparison, extra=extra).decode("utf-8"))
