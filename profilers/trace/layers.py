"""Where in the model the step goes: one row per module (repeated blocks grouped), from either source.

- a launched run's ``layers.json``, written by the agent (:mod:`stepwise_agent.layers`): the model's
  ``named_modules()`` tree with forward and backward time, activation bytes kept for backward, parameters and
  where each class and its ``forward`` are defined; :func:`from_agent` reads it;
- a trace recorded with ``with_stack=True`` (or ``with_modules=True``): its ``python_function`` events named
  ``nn.Module: Linear_0`` nest into a tree of module classes; :func:`from_trace` times them (forward only: a
  trace does not say which module a backward op belongs to).

Repeated modules are one row: ``blocks.0.attn`` and ``blocks.1.attn`` are ``blocks.*.attn`` (a trace's
``BertLayer_0`` … ``BertLayer_11`` under one parent are ``BertLayer``), with the count in ``instances``. Every
time is per step and inclusive of the module's submodules; ``share`` is forward plus backward over the step.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from profilers.trace.events import Trace

MODULE_EVENT = "nn.Module: "
LAYERS_FILE = "layers.json"  # the agent's record in a run folder (stepwise_agent.layers)
_INSTANCE = re.compile(r"_\d+$")
_INDEX = re.compile(r"(?<![^.])\d+(?![^.])")  # a whole dotted segment of digits: a ModuleList/Sequential index
_FORWARD_FRAME = re.compile(r"^(?P<path>.+?)\((?P<line>\d+)\): forward$")
HOW_TO_RECORD = ("record it with torch.profiler.profile(with_stack=True) (or with_modules=True), or launch the "
                 "script with Stepwise, whose agent records each module")
#: a module whose heaviest child holds this much of its time is a wrapper: the top layer is further down
WRAPPER = 0.75
NO_MODULES = f"This trace has no module information (no nn.Module events): {HOW_TO_RECORD}."


@dataclass(frozen=True)
class LayerRow:
    """One module, or one group of repeated modules, per step. ``None``: not known from this source."""

    name: str  # dotted module path, repeated indices as ``*`` ("blocks.*.attn"); a trace's: class names
    parent: str | None
    module_class: str
    instances: int
    calls: float  # calls per step, all instances
    forward_ms: float
    backward_ms: float | None
    share: float | None  # (forward + backward) / step time
    saved_bytes: int | None  # activation bytes kept for backward per step
    params: int | None
    class_where: str | None  # "model.py:52": where the class is defined
    forward_where: str | None  # where its forward is defined

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "parent": self.parent, "class": self.module_class,
                "instances": self.instances, "calls_per_step": round(self.calls, 3),
                "forward_ms": round(self.forward_ms, 4),
                "backward_ms": None if self.backward_ms is None else round(self.backward_ms, 4),
                "share": None if self.share is None else round(self.share, 4),
                "saved_activation_bytes": self.saved_bytes, "params": self.params,
                "class_where": self.class_where, "forward_where": self.forward_where}


@dataclass(frozen=True)
class Layers:
    """The per-module view of one input: rows sorted by share (largest first), or none and why."""

    rows: tuple[LayerRow, ...] = field(default=())
    source: str = "none"  # "agent" | "trace" | "none"
    note: str | None = None  # what the rows are (timing basis), or why there are none

    @property
    def top(self) -> LayerRow | None:
        """The layer that holds the step: from the heaviest root down through every module that is mostly one
        child (a wrapper, a ModuleList, repeated blocks), to the heaviest child of the first module whose time
        its children share (``blocks.*.attn`` beside ``blocks.*.mlp``)."""
        timed = [r for r in self.rows if r.share is not None]
        roots = [r for r in timed if r.parent is None]
        if not roots:
            return None
        node = max(roots, key=lambda r: r.share or 0.0)
        while True:
            children = [r for r in timed if r.parent == node.name]
            if not children:
                return node
            best = max(children, key=lambda r: r.share or 0.0)
            if (best.share or 0.0) < WRAPPER * (node.share or 0.0):
                return best
            node = best

    def evidence(self) -> str | None:
        """One line for the advisor: the top layer, its share and where it is defined."""
        top = self.top
        if top is None or top.share is None:
            return None
        where = top.class_where or top.forward_where
        return f"top layer: {top.name} {top.share:.0%} of the step" + (f" ({where})" if where else "")


def where(path: str | None, line: int | None) -> str | None:
    return f"{os.path.basename(path)}:{line}" if path and line else None


def grouped(name: str) -> str:
    """``"blocks.3.attn"`` → ``"blocks.*.attn"``."""
    return _INDEX.sub("*", name)


def _sorted(rows: list[LayerRow]) -> tuple[LayerRow, ...]:
    return tuple(sorted(rows, key=lambda r: (-(r.share or 0.0), -r.forward_ms, r.name)))


def from_agent(doc: Any) -> Layers:
    """The rows of a run's ``layers.json`` (:mod:`stepwise_agent.layers`), repeated modules grouped."""
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        why = doc.get("error") if isinstance(doc, dict) else None
        return Layers(note=f"The run's per-module record could not be read{': ' + why if why else ''}.")
    raw = [r for r in doc["rows"] if isinstance(r, dict) and isinstance(r.get("name"), str)]
    if not raw:
        return Layers(note="The run recorded no module: the script ran no torch.nn.Module in its profiled steps.")
    roots = [r["name"] for r in raw if r.get("parent") is None]
    main = roots[0] if len(roots) == 1 else None

    def shown(name: str) -> str:  # one model: its submodules by their own names ("blocks.*.attn")
        return grouped(name[len(main) + 1:] if main is not None and name.startswith(main + ".") else name)

    step_ms = doc.get("step_ms")
    groups: dict[str, dict[str, Any]] = {}
    for r in raw:
        key = shown(r["name"])
        g = groups.setdefault(key, {"row": r, "n": 0, "calls": 0.0, "fwd": 0.0, "bwd": 0.0, "saved": 0,
                                    "params": 0, "saved_known": r.get("saved_bytes") is not None})
        g["n"] += 1
        g["calls"] += float(r.get("calls") or 0.0)
        g["fwd"] += float(r.get("forward_ms") or 0.0)
        g["bwd"] += float(r.get("backward_ms") or 0.0)
        g["saved"] += int(r.get("saved_bytes") or 0)
        g["params"] += int(r.get("params") or 0)
    rows = []
    for key, g in groups.items():
        r = g["row"]
        parent = r.get("parent")
        share = (g["fwd"] + g["bwd"]) / step_ms if isinstance(step_ms, (int, float)) and step_ms > 0 else None
        rows.append(LayerRow(
            name=key, parent=shown(parent) if isinstance(parent, str) else None,
            module_class=str(r.get("class", "")), instances=g["n"], calls=g["calls"], forward_ms=g["fwd"],
            backward_ms=g["bwd"], share=share, saved_bytes=g["saved"] if g["saved_known"] else None,
            params=g["params"], class_where=where(r.get("class_file"), r.get("class_line")),
            forward_where=where(r.get("forward_file"), r.get("forward_line"))))
    note = f"{doc.get('timing', 'time inside each module')}, per profiled step (agent hooks)"
    return Layers(rows=_sorted(rows), source="agent", note=note)


def _module_paths(ev: pd.DataFrame) -> tuple[list[str], list[str]]:
    """Each ``nn.Module`` event's path of class names (its enclosing module events on its thread) and its own
    instance (``Linear_3``), in ``ev``'s order (sorted by thread, then start)."""
    paths, instances = [], []
    stack: list[tuple[int, str]] = []  # (end_ns, path)
    last_tid = None
    for tid, name, start, end in zip(ev["tid"], ev["name"], ev["start_ns"], ev["end_ns"]):
        if tid != last_tid:
            stack, last_tid = [], tid
        while stack and stack[-1][0] <= start:
            stack.pop()
        own = str(name)[len(MODULE_EVENT):]
        cls = _INSTANCE.sub("", own)
        path = f"{stack[-1][1]}.{cls}" if stack else cls
        paths.append(path)
        instances.append(f"{stack[-1][1] if stack else ''}/{own}")
        stack.append((int(end), path))
    return paths, instances


def _launched_gpu_ns(events: pd.DataFrame, mods: pd.DataFrame) -> np.ndarray:
    """For each module event, the GPU time of the kernels, copies and sets launched inside it on its thread."""
    gpu = events[events["kind"].isin(["kernel", "memcpy", "memset"]) & (events["correlation"] >= 0)]
    launches = events[(events["kind"] == "runtime") & (events["correlation"] >= 0)]
    joined = launches[["tid", "start_ns", "correlation"]].merge(
        gpu.groupby("correlation", observed=True)["dur_ns"].sum().rename("gpu_ns"), left_on="correlation",
        right_index=True)
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
    """Each module event's own ``forward`` frame (the first ``path(line): forward`` event inside it)."""
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
    """The module tree of a ``with_stack`` trace's ``nn.Module`` events (its first rank), or the sentence that
    says it has none and how to record it."""
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
    frame = pd.DataFrame({"path": paths, "instance": instances,
                          "ns": _launched_gpu_ns(ev[ev["rank"] == rank], mods) if on_gpu
                          else mods["dur_ns"].to_numpy(), "forward": _forward_frames(py, mods)})
    rows = []
    for path, g in frame.groupby("path", sort=False):
        fwd = float(g["ns"].sum()) / n / 1e6
        share = fwd / step_ms if step_ms else None
        known = g["forward"].dropna()
        parent = path.rsplit(".", 1)[0] if "." in path else None
        rows.append(LayerRow(name=str(path), parent=parent, module_class=str(path).rsplit(".", 1)[-1],
                             instances=int(g["instance"].nunique()), calls=len(g) / n, forward_ms=fwd,
                             backward_ms=None, share=share, saved_bytes=None, params=None, class_where=None,
                             forward_where=str(known.iloc[0]) if len(known) else None))
    basis = "GPU time of the kernels each module launched" if on_gpu else "CPU time inside each module"
    return Layers(rows=_sorted(rows), source="trace",
                  note=f"{basis}, forward only, from the trace's nn.Module events (a trace does not tie "
                       "backward ops to modules; launch the script with Stepwise for backward and memory)")
