"""Where in the model the step goes: one row per module (repeated blocks grouped), from a launched
run's agent record (:func:`from_agent`) or a ``with_stack`` trace's ``nn.Module`` events
(:func:`from_trace`). See :mod:`profilers.layers.rows`."""

from profilers.layers.rows import (
    LAYERS_FILE,
    MODULE_EVENT,
    NO_MODULES,
    LayerRow,
    Layers,
    from_agent,
    grouped,
    where,
)
from profilers.layers.trace import from_trace

__all__ = [
    "LAYERS_FILE",
    "MODULE_EVENT",
    "NO_MODULES",
    "LayerRow",
    "Layers",
    "from_agent",
    "from_trace",
    "grouped",
    "where",
]
