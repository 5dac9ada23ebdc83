"""The spec form of the Launch page: one widget per knob, typed from the spec's annotations."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app.services.launching import KNOB_GROUPS, Knob, knob
from profilers.run.spec import TrainingSpec

HELP = {
    "num_workers": "DataLoader worker processes (0: load in the training process).",
    "prefetch_factor": "Batches each worker prepares ahead; 0 leaves PyTorch's default.",
    "memory_budget_mb": "Stop the run (out_of_memory) above this many MiB; 0: no budget.",
    "step_timeout_s": "Fail a step that takes longer than this; 0: no timeout.",
    "world_size": "Ranks on this machine (gloo on CPU); more than the cores available only slows each rank.",
    "cache_decoded": "Keep decoded samples in memory after their first use.",
}


def _widget(k: Knob, value: Any, key: str) -> Any:
    label = k.name.replace("_", " ")
    help_text = HELP.get(k.name)
    if k.kind == "bool":
        return st.checkbox(label, value=bool(value), key=key, help=help_text)
    if k.kind == "choice":
        options = list(k.options)
        return st.selectbox(label, options, index=options.index(value) if value in options else 0, key=key,
                            help=help_text)
    if k.kind == "int":
        return st.number_input(label, min_value=0, value=int(value or 0), step=1, key=key, help=help_text)
    if k.kind == "float":
        return st.number_input(label, min_value=0.0, value=float(value or 0.0), key=key, help=help_text,
                               format="%g")
    return st.text_input(label, value="" if value is None else str(value), key=key, help=help_text)


def knob_inputs(spec: TrainingSpec, key_prefix: str) -> dict[str, Any]:
    """Render every knob of :data:`KNOB_GROUPS` (three columns per group); returns ``{field: value}``."""
    values: dict[str, Any] = {}
    for group, names in KNOB_GROUPS.items():
        st.markdown(f"**{group}**")
        cols = st.columns(3)
        for i, name in enumerate(names):
            with cols[i % 3]:
                values[name] = _widget(knob(name), getattr(spec, name), f"{key_prefix}.{name}")
    return values
