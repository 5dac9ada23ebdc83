"""Page state that lives in the address: Compare's two runs (``?a=<id>&b=<id>``) and the Events window
(``?from=<ms>&to=<ms>``), so a reload or a copied link opens the same view.

The address is read once per new value (a reload, a pasted link) and written back after every change the
user makes; a value the page wrote itself is never read back over a newer pick.
"""

from __future__ import annotations

import streamlit as st

from app import state
from app.widgets import missing_run, ui
from profilers.run.records import RunRecord

A_PARAM, B_PARAM = "a", "b"
FROM_PARAM, TO_PARAM = "from", "to"
GPU_PARAM = "gpu"
_WRITTEN = (
    "stepwise.url_state.written"  # per page: the query values this session last wrote or applied
)


def _last(page: str) -> tuple[str | None, ...] | None:
    return st.session_state.get(_WRITTEN, {}).get(page)


def _remember(page: str, values: tuple[str | None, ...]) -> None:
    written = dict(st.session_state.get(_WRITTEN, {}))
    written[page] = values
    st.session_state[_WRITTEN] = written


def _put(name: str, value: str | None) -> None:
    if value is None:
        st.query_params.pop(name, None)
    elif st.query_params.get(name) != value:
        st.query_params[name] = value


def compare_pickers(records: list[RunRecord]) -> tuple[RunRecord | None, RunRecord | None]:
    """Two run pickers, A (before) and B (after), that start empty (nothing is compared until the user picks)
    unless the address or this session named the pair. An id in the address that names no run: "no such run"."""
    by_id = {r.run_id: r for r in records}
    ids = list(by_id)
    linked = (st.query_params.get(A_PARAM), st.query_params.get(B_PARAM))
    for side, run_id in zip(("run A", "run B"), linked):
        if run_id and run_id not in by_id:
            missing_run.render(run_id, side)
            st.stop()
    keys = ("compare.a", "compare.b")
    if linked != _last("compare") and any(linked):  # a reload or a pasted link: the address wins
        for key, run_id in zip(keys, linked):
            st.session_state[key] = run_id
    elif not any(linked):  # back on the page from another: this session's last pair, if any
        for key, run_id in zip(keys, state.compare_pair()):
            if run_id in by_id and key not in st.session_state:
                st.session_state[key] = run_id
    left, right = st.columns(2)
    picked: list[str | None] = []
    for col, key, label in ((left, keys[0], "A (before)"), (right, keys[1], "B (after)")):

        def describe(i: str) -> str:
            return ui.describe_run(by_id[i])

        if (
            st.session_state.get(key) in by_id
        ):  # the widget's own state says which (no index beside it)
            picked.append(col.selectbox(label, ids, key=key, format_func=describe))
        else:
            st.session_state.pop(key, None)
            picked.append(
                col.selectbox(
                    label,
                    ids,
                    key=key,
                    index=None,
                    placeholder="Pick a run or trace",
                    format_func=describe,
                )
            )
    a, b = picked
    _put(A_PARAM, a)
    _put(B_PARAM, b)
    _remember("compare", (a, b))
    state.set_compare_pair(a, b)
    return (by_id[a] if a else None), (by_id[b] if b else None)


def events_window(run_id: str) -> tuple[float, float] | None:
    """The window the address names for ``run_id`` when it is new to this session (a reload, a pasted link)."""
    linked = (st.query_params.get(FROM_PARAM), st.query_params.get(TO_PARAM))
    last = _last("events")
    if linked[0] is None or linked[1] is None or (last is not None and linked == last[1:]):
        return None  # none named, or the one this page wrote itself (e.g. for the run shown before)
    _remember("events", (run_id, *linked))
    try:
        return float(linked[0]), float(linked[1])
    except ValueError:
        return None


def show_events_window(run_id: str, start_ms: float, end_ms: float) -> None:
    """Write the shown window into the address (3 decimals: a µs)."""
    lo, hi = f"{start_ms:.3f}", f"{end_ms:.3f}"
    _put(FROM_PARAM, lo)
    _put(TO_PARAM, hi)
    _remember("events", (run_id, lo, hi))


def gpu_model_picker(models: tuple[str, ...], arch: str | None) -> str | None:
    """A GPU-model picker for MFU (``?gpu=<model>``: a reload or a link keeps it); ``None`` while unpicked.
    ``arch``: the architecture the kernel names show, said beside the picker."""
    key = "analysis.gpu_model"
    linked = st.query_params.get(GPU_PARAM)
    if linked in models and (linked,) != _last("gpu"):
        st.session_state[key] = linked
    hint = f" (its kernel names show a {arch} GPU)" if arch else ""
    picked = st.selectbox(
        f"GPU model for MFU — the trace does not name it{hint}",
        [None, *models],
        format_func=lambda m: "not named" if m is None else m,
        key=key,
    )
    _put(GPU_PARAM, picked)
    _remember("gpu", (picked,))
    return picked
