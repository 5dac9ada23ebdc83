"""The Analysis page's Layers tab: where in the model the step goes, one row per module (repeated
blocks as one), drawn as the module tree and listed largest share first. It renders
``Analysis.layers`` and computes nothing."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from advisors.analysis import Analysis
from app.widgets import ui
from reports.charts.layers import layers_icicle

COLUMNS = {
    "module": st.column_config.TextColumn(width="large"),
    "share": st.column_config.ProgressColumn(
        "share of step", format="percent", min_value=0.0, max_value=1.0
    ),
    "forward ms": st.column_config.NumberColumn(format="%.3f", width="small"),
    "backward ms": st.column_config.NumberColumn(format="%.3f", width="small"),
    "calls/step": st.column_config.NumberColumn(format="%.1f", width="small"),
    "saved MiB": st.column_config.NumberColumn(
        "activations kept (MiB)", format="%.2f", width="small"
    ),
}


def table(a: Analysis) -> pd.DataFrame:
    """The rows as the page lists them (per step; ``None`` where the source does not know)."""
    return pd.DataFrame(
        [
            {
                "module": r.name,
                "class": r.module_class,
                "instances": r.instances,
                "share": r.share,
                "forward ms": r.forward_ms,
                "backward ms": r.backward_ms,
                "calls/step": r.calls,
                "saved MiB": None if r.saved_bytes is None else r.saved_bytes / 2**20,
                "params": r.params,
                "class defined": r.class_where,
                "forward defined": r.forward_where,
            }
            for r in a.layers.rows
        ]
    )


def layers_panel(a: Analysis) -> None:
    layers = a.layers
    if not layers.rows:
        st.info(ui.text(layers.note or "No per-module information for this input."))
        return
    evidence = layers.evidence()
    if evidence:
        st.markdown(f"**{ui.text(evidence[0].upper() + evidence[1:])}**")
    st.caption(ui.text(layers.note or ""))
    sizes = ["time"] + (["memory"] if any(r.saved_bytes for r in layers.rows) else [])
    by = (
        st.radio("Size by", sizes, horizontal=True, key="analysis.layers_by")
        if len(sizes) > 1
        else "time"
    )
    ui.chart(layers_icicle(layers, by or "time"), key="analysis.layers_tree")
    st.dataframe(
        table(a),
        hide_index=True,
        width="stretch",
        column_config=COLUMNS,
        key="analysis.layers_table",
    )
