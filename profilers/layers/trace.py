"""The module tree of a trace recorded with ``with_stack=True`` (or ``with_modules=True``): its
``python_function`` events named ``nn.Module: Linear_0`` nested by time on their thread, timed by
the module's own span (CPU) or the kernels launched inside it (GPU), forward only."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from profilers.layers.rows import MODULE_EVENT, NO_MODULES, LayerRow, Layers, sorted_rows, where
from profilers.trace.events import Trace

_INSTANCE = re.compile(r"_\d+$")
_FORWARD_FRAME = re.compile(r"^(?P<path>.+?)\((?P<line>\d+)\): forward$")


def _module_paths(ev: pd.DataFrame) -> tuple[list[str], list[str]]:
    """Each ``nn.Module`` event's path of class names (its enclosing module events on its thread)
    and its own instance (``Linear_3``), in ``ev``'s order (sorted by thread, then start)."""
    paths, instances = [], []
    stack: list[tuple[int, str]] = []  # (end_ns, path)
    last_tid = None
    for tid, name, start, end in zip(ev["tid"], ev["name"], ev["start_ns"], ev["end_ns"]):
        if tid != last_tid:
            stack, last_tid = [], tid
        while stack and stack[-1][0] <= start:
            stack.pop()
        own = str(name)[len(MODULE_EVENT) :]
        cls = _INSTANCE.sub("", own)
        path = f"{stack[-1][1]}.{cls}" if stack else cls
        paths.append(path)
        instances.append(f"{stack[-1][1] if stack else ''}/{own}")
        stack.append((int(end), path))
    return paths, instances


def _launched_gpu_ns(events: pd.DataFrame, mods: pd.DataFrame) -> np.ndarray:
    """For each module event, the GPU time of the kernels, copies and sets launched inside it on its
    thread."""
    gpu = events[events["kind"].isin(["kernel", "memcpy", "memset"]) & (events["correlation"] >= 0)]
    launches = events[(events["kind"] == "runtime") & (events["correlation"] >= 0)]
    joined = launches[["tid", "start_ns", "correlation"]].merge(
        gpu.groupby("correlation", observed=True)["dur_ns"].sum().rename("gpu_ns"),
        left_on="correlation",
        right_index=True,
    )
    out = np.zeros(len(mods), dtype=np.int64)
    for tid, part in joined.groupby("tid", observed=True):
        part = part.sort_values("start_ns")
        starts = part["start_ns"].to_numpy()
        cum = np.concatenate([[0], np.cumsum(part["gpu_ns"].to_numpy())])
        mine = (mods["tid"] == tid).to_numpy()
        lo = np.searchsorted(starts, mods["start_ns"].to_numpy()[mine], side="left")
        hi = np.searchsorted(starts, mods["end_ns"].to_numpy()[mine], side="left")
        out[mine] = cum[hi] - cum[lo]
    return out


def _forward_frames(py: pd.DataFrame, mods: pd.DataFrame) -> list[str | None]:
    """Each module event's own ``forward`` frame (the first ``path(line): forward`` event inside
    it)."""
    frames = py[py["name"].astype(str).str.match(_FORWARD_FRAME.pattern)]
    out: list[str | None] = [None] * len(mods)
    for tid, part in frames.groupby("tid", observed=True):
        starts = part["start_ns"].to_numpy()
        names = part["name"].astype(str).to_numpy()
        idx = np.flatnonzero((mods["tid"] == tid).to_numpy())
        pos = np.searchsorted(starts, mods["start_ns"].to_numpy()[idx], side="left")
        ends = mods["end_ns"].to_numpy()[idx]
        for i, p, end in zip(idx, pos, ends):
            if p < len(starts) and starts[p] < end:
                m = _FORWARD_FRAME.match(names[p])
                out[i] = where(m["path"], int(m["line"])) if m else None
    return out


def from_trace(trace: Trace, step_ms: float | None) -> Layers:
    """The module tree of a ``with_stack`` trace's ``nn.Module`` events (its first rank), or the
    sentence that says it has none and how to record it."""
    ev = trace.events
    if ev.empty:
        return Layers(note=NO_MODULES)
    rank = min(trace.ranks) if trace.ranks else int(ev["rank"].min())
    py = ev[(ev["kind"] == "python_function") & (ev["rank"] == rank)]
    mods = py[py["name"].astype(str).str.startswith(MODULE_EVENT)]
    if mods.empty:
        return Layers(note=NO_MODULES)
    if (mods["step"] >= 0).any():
        mods = mods[mods["step"] >= 0]
    mods = mods.sort_values(["tid", "start_ns"], kind="stable")
    steps = trace.steps[trace.steps["rank"] == rank] if len(trace.steps) else trace.steps
    n = max(int(steps["step"].nunique()) if len(steps) else 1, 1)
    on_gpu = trace.has_gpu
    paths, instances = _module_paths(mods)
    frame = pd.DataFrame(
        {
            "path": paths,
            "instance": instances,
            "ns": _launched_gpu_ns(ev[ev["rank"] == rank], mods)
            if on_gpu
            else mods["dur_ns"].to_numpy(),
            "forward": _forward_frames(py, mods),
        }
    )
    rows = []
    for key, g in frame.groupby("path", sort=False):
        path = str(key)
        fwd = float(g["ns"].sum()) / n / 1e6
        share = fwd / step_ms if step_ms else None
        known = g["forward"].dropna()
        parent = path.rsplit(".", 1)[0] if "." in path else None
        rows.append(
            LayerRow(
                name=path,
                parent=parent,
                module_class=path.rsplit(".", 1)[-1],
                instances=int(g["instance"].nunique()),
                calls=len(g) / n,
                forward_ms=fwd,
                backward_ms=None,
                share=share,
                saved_bytes=None,
                params=None,
                class_where=None,
                forward_where=str(known.iloc[0]) if len(known) else None,
            )
        )
    basis = (
        "GPU time of the kernels each module launched" if on_gpu else "CPU time inside each module"
    )
    return Layers(
        rows=sorted_rows(rows),
        source="trace",
        note=f"{basis}, forward only, from the trace's nn.Module events (a trace "
        "does not tie backward ops to modules; launch the script with Stepwise "
        "for backward and memory)",
    )
