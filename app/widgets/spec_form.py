"""The settings form of the Launch page: one widget per setting, typed from the training script's own flags."""

from __future__ import annotations

from typing import Any, Mapping

import streamlit as st

from app.services.launching import KNOB_GROUPS, Knob, knob

HELP = {
    "steps": "Optimizer steps in all: warm-up, timed steps, then the profiler's window, which ends the run.",
    "prefetch_factor": "Batches each worker prepares ahead; 0 leaves PyTorch's default.",
    "memory_budget_mb": "The run's memory limit: past it the run ends out_of_memory; 0: none.",
    "step_timeout_s": "Stop the run when no step ends for this long; 0: no timeout.",
    "world_size": "Ranks on this machine, under torchrun (gloo on CPU); more than the cores only slows each rank.",
}


def _widget(k: Knob, value: Any, key: str) -> Any:
    label = k.name.replace("_", " ")
    help_text = HELP.get(k.name) or k.help or None
    if k.kind == "bool":
        return st.checkbox(label, value=bool(value), key=key, help=help_text)
    if k.kind == "choice":
        options = list(k.options)
        return st.selectbox(
            label,
            options,
            index=options.index(value) if value in options else 0,
            key=key,
            help=help_text,
        )
    if k.kind == "int":
        return st.number_input(
            label, min_value=0, value=int(value or 0), step=1, key=key, help=help_text
        )
    if k.kind == "float":
        return st.number_input(
            label, min_value=0.0, value=float(value or 0.0), key=key, help=help_text, format="%g"
        )
    return st.text_input(label, value="" if value is None else str(value), key=key, help=help_text)


def knob_inputs(settings: Mapping[str, Any], key_prefix: str) -> dict[str, Any]:
    """Render every setting of :data:`KNOB_GROUPS` (three columns per group); returns ``{name: value}``."""
    values: dict[str, Any] = {}
    for group, names in KNOB_GROUPS.items():
        st.markdown(f"**{group}**")
        cols = st.columns(3)
        for i, name in enumerate(names):
            with cols[i % 3]:
                values[name] = _widget(knob(name), settings.get(name), f"{key_prefix}.{name}")
    return values
