"""A memory fix's peaks on its Apply card, from its record: the sentence the terminal prints (the
peak of live tensors before → after with its change, the run peaks, the step time they cost) and a
bar of each peak before beside after. Nothing is recomputed: every number is the record's."""

from __future__ import annotations

import streamlit as st

from advisors.experiments.results.record import ExperimentRecord
from app.widgets import ui
from reports.charts import compare as charts_compare

NOTE = (
    "Live tensors: the profiler's peak of allocated bytes over the profiled steps (the step's own "
    "tensors). Run peak: everything the process held (its resident memory on a CPU, the CUDA "
    "allocator's peak on a GPU)."
)


def memory_peaks(x: ExperimentRecord, key: str) -> None:
    """The memory a fix saved beside the step time it cost (nothing when no memory was recorded;
    ``key`` prefixes the chart's key)."""
    said, m = x.memory_text, x.memory
    if said is None or m is None:
        return
    st.markdown(f"**Memory:** {ui.text(said)}")
    bars = m.bars()
    if bars:
        ui.chart(charts_compare.memory_peaks(bars), key=f"{key}.memory")
        st.caption(NOTE)
