"""The per-module view (:mod:`profilers.layers`) of each kind of input, and its ``analyze --json``
fields.

A stored run reads the agent's ``layers.json`` (forward, backward, memory, where defined), else its
trace's ``nn.Module`` events; a trace its ``nn.Module`` events; a folder read as summaries and a
memory snapshot have none, and say so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profilers.store.files import read_json
from profilers.trace.breakdown import Breakdown
from profilers.trace.events import Trace
from profilers.layers import LAYERS_FILE, NO_MODULES, Layers, from_agent, from_trace

SNAPSHOT = Layers(
    note="A memory snapshot records allocations, not module times: no per-module view."
)
SUMMARIES = Layers(
    note="Read from the ranks' summaries, which keep no module tree: open one "
    "rank's trace for its per-module view."
)


def summaries_layers(module_events: int) -> Layers:
    """A job read from its ranks' summaries: none holds the module tree, but each counts its traces'
    ``nn.Module`` events, so a job without any says what loading its traces would say."""
    return SUMMARIES if module_events else Layers(note=NO_MODULES)


def trace_layers(trace: Trace, b: Breakdown) -> Layers:
    """A loaded trace's modules, timed against its median profiled step."""
    return from_trace(trace, b.step_time_ms if b.n_steps else None)


def run_layers(run_dir: Path, from_its_trace: Layers | None) -> Layers:
    """A run's modules: the agent's record when it wrote one, else what its trace holds."""
    if (run_dir / LAYERS_FILE).is_file():
        return from_agent(read_json(run_dir / LAYERS_FILE))
    if from_its_trace is not None:
        return from_its_trace
    return Layers(note="The run left no trace and no per-module record.")


def layers_json(layers: Layers) -> dict[str, Any]:
    """``analyze --json``'s ``layers`` (rows, largest share first), ``layers_source``,
    ``layers_note`` and ``top_layer``."""
    return {
        "layers": [r.to_json() for r in layers.rows],
        "layers_source": layers.source,
        "layers_note": layers.note,
        "top_layer": layers.evidence(),
    }
