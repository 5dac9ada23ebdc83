"""Where in the model the step goes: one row per module (repeated blocks grouped), either source:

- a launched run's ``layers.json``, written by the agent (:mod:`stepwise_agent.layers`): the model's
  ``named_modules()`` tree with forward and backward time, activation bytes kept for backward,
  parameters and where each class and its ``forward`` are defined; :func:`from_agent` reads it;
- a trace recorded with ``with_stack=True`` (or ``with_modules=True``): its ``python_function``
  events named ``nn.Module: Linear_0`` nest into a tree of module classes; :func:`from_trace` times
  them (forward only: a trace does not say which module a backward op belongs to).

Repeated modules are one row: ``blocks.0.attn`` and ``blocks.1.attn`` are ``blocks.*.attn`` (a
trace's ``BertLayer_0`` … ``BertLayer_11`` under one parent are ``BertLayer``), with the count in
``instances``. Every time is per step and inclusive of the module's submodules; ``share`` is forward
plus backward over the step.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from stepwise_agent.attention_source import forward_block, recognise

MODULE_EVENT = "nn.Module: "
LAYERS_FILE = "layers.json"  # the agent's record in a run folder (stepwise_agent.layers)
#: a whole dotted segment of digits: the index of a ModuleList or a Sequential
_INDEX = re.compile(r"(?<![^.])\d+(?![^.])")
HOW_TO_RECORD = (
    "record it with torch.profiler.profile(with_stack=True) (or with_modules=True), "
    "or launch the script with Stepwise, whose agent records each module"
)
#: a module whose heaviest child holds this much of its time is a wrapper: the top layer is below
WRAPPER = 0.75
NO_MODULES = f"This trace has no module information (no nn.Module events): {HOW_TO_RECORD}."


@dataclass(frozen=True)
class LayerRow:
    """One module, or one group of repeated modules, per step. ``None``: not known from this
    source."""

    name: str  # dotted path, repeated indices as ``*`` ("blocks.*.attn"); a trace's: class names
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
    #: the hand-written attention its forward's source computes ("matmul → scale → mask → softmax →
    #: matmul"), from the file the agent named; ``None``: none, or the source was not read
    hand_attention: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "parent": self.parent,
            "class": self.module_class,
            "instances": self.instances,
            "calls_per_step": round(self.calls, 3),
            "forward_ms": round(self.forward_ms, 4),
            "backward_ms": None if self.backward_ms is None else round(self.backward_ms, 4),
            "share": None if self.share is None else round(self.share, 4),
            "saved_activation_bytes": self.saved_bytes,
            "params": self.params,
            "class_where": self.class_where,
            "forward_where": self.forward_where,
            "hand_attention": self.hand_attention,
        }


@dataclass(frozen=True)
class Layers:
    """The per-module view of one input: rows sorted by share (largest first), or none and why."""

    rows: tuple[LayerRow, ...] = field(default=())
    source: str = "none"  # "agent" | "trace" | "none"
    note: str | None = None  # what the rows are (timing basis), or why there are none

    @property
    def top(self) -> LayerRow | None:
        """The layer that holds the step: from the heaviest root down through every module that is
        mostly one child (a wrapper, a ModuleList, repeated blocks), to the heaviest child of the
        first module whose time its children share (``blocks.*.attn`` beside ``blocks.*.mlp``)."""
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
        said = f"top layer: {top.name} {top.share:.0%} of the step"
        return said + (f" ({where})" if where else "")


def where(path: str | None, line: int | None) -> str | None:
    return f"{os.path.basename(path)}:{line}" if path and line else None


@lru_cache(maxsize=256)
def _lines(path: str, mtime: float) -> tuple[str, ...]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return tuple(f.readlines())


def hand_attention(path: Any, line: Any) -> str | None:
    """The hand-written attention of the ``forward`` at ``path:line``, in words (``None``: none,
    or the file is gone or unreadable)."""
    if not isinstance(path, str) or not isinstance(line, int):
        return None
    try:
        lines = _lines(path, os.path.getmtime(path))
    except OSError:
        return None
    source = forward_block(list(lines), line)
    shape = recognise(source)[0] if source else None
    return shape.describe() if shape is not None else None


def grouped(name: str) -> str:
    """``"blocks.3.attn"`` → ``"blocks.*.attn"``."""
    return _INDEX.sub("*", name)


def sorted_rows(rows: list[LayerRow]) -> tuple[LayerRow, ...]:
    return tuple(sorted(rows, key=lambda r: (-(r.share or 0.0), -r.forward_ms, r.name)))


def from_agent(doc: Any) -> Layers:
    """The rows of a run's ``layers.json`` (:mod:`stepwise_agent.layers`), repeated modules
    grouped."""
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        why = doc.get("error") if isinstance(doc, dict) else None
        said = f": {why}" if why else ""
        return Layers(note=f"The run's per-module record could not be read{said}.")
    raw = [r for r in doc["rows"] if isinstance(r, dict) and isinstance(r.get("name"), str)]
    if not raw and isinstance(doc.get("note"), str):
        return Layers(note=f"No per-module record: {doc['note']}.")
    if not raw:
        return Layers(
            note="The run recorded no module: the script ran no torch.nn.Module in its "
            "profiled steps."
        )
    roots = [r["name"] for r in raw if r.get("parent") is None]
    main = roots[0] if len(roots) == 1 else None

    def shown(name: str) -> str:  # one model: its submodules by their own names ("blocks.*.attn")
        below = main is not None and name.startswith(main + ".")
        return grouped(name[len(main) + 1 :] if below and main is not None else name)

    step_ms = doc.get("step_ms")
    groups: dict[str, dict[str, Any]] = {}
    for r in raw:
        key = shown(r["name"])
        g = groups.setdefault(
            key,
            {
                "row": r,
                "n": 0,
                "calls": 0.0,
                "fwd": 0.0,
                "bwd": 0.0,
                "saved": 0,
                "params": 0,
                "saved_known": r.get("saved_bytes") is not None,
            },
        )
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
        timed = isinstance(step_ms, (int, float)) and step_ms > 0
        share = (g["fwd"] + g["bwd"]) / step_ms if timed else None
        rows.append(
            LayerRow(
                name=key,
                parent=shown(parent) if isinstance(parent, str) else None,
                module_class=str(r.get("class", "")),
                instances=g["n"],
                calls=g["calls"],
                forward_ms=g["fwd"],
                backward_ms=g["bwd"],
                share=share,
                saved_bytes=g["saved"] if g["saved_known"] else None,
                params=g["params"],
                class_where=where(r.get("class_file"), r.get("class_line")),
                forward_where=where(r.get("forward_file"), r.get("forward_line")),
                hand_attention=hand_attention(r.get("forward_file"), r.get("forward_line")),
            )
        )
    note = f"{doc.get('timing', 'time inside each module')}, per profiled step (agent hooks)"
    return Layers(rows=sorted_rows(rows), source="agent", note=note)
