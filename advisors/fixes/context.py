"""What the last run of a script showed, as a fix reads it to choose its knobs (:class:`ScriptContext`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from profilers.layers import LayerRow
from profilers.telemetry.threads import ThreadUse


@dataclass(frozen=True)
class ScriptContext:
    """What the last run of the script showed: its device, cores, how busy they were, its loader's settings,
    its model's modules."""

    device: str = "cpu"
    world_size: int = 1
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    host_busy: float | None = None  # share of all host cores busy during steady steps (0..1)
    loader: Mapping[str, Any] = field(
        default_factory=dict
    )  # the training DataLoader's effective settings
    sites: Mapping[str, Any] = field(
        default_factory=dict
    )  # call sites in the user's code (the first of each)
    all_sites: Mapping[str, Any] = field(
        default_factory=dict
    )  # every site of each kind (a GAN's two models)
    config: Mapping[str, Any] = field(
        default_factory=dict
    )  # how the script is configured (agent: inject.config)
    threads: ThreadUse | None = (
        None  # torch's threads in the last run (agent: injected.json threads)
    )
    other_cores: float | None = (
        None  # cores other programs used during its steady steps (telemetry)
    )
    #: the model's per-module rows (the agent's layers.json): forward/backward time, saved bytes
    layers: tuple[LayerRow, ...] = ()

    @property
    def workers(self) -> int:
        return int(self.loader.get("num_workers") or 0)

    @property
    def convolutions(self) -> int | None:
        """How many convolutions the launcher saw in the model's call (``None``: not recorded)."""
        n = (self.sites.get("model_call") or {}).get("convolutions")
        return int(n) if n is not None else None
