"""How a stored run was configured, as the analysis reads it (:class:`RunConfig`): one record for any launched run.

A launched script — a user's or a sample workload's, one path for both — is read from what the agent saw of its
objects (``injected.json``'s ``settings``: the training DataLoader's keywords, autocast, compile, the optimizer's
implementation, backward passes per step, checkpointing, ``no_sync``, comm hooks, TF32 and cuDNN flags) and what the
launcher asked of the run (``boot.json``: its warm-up and length; ``launch.json``: its memory budget). So a user's
script gets the same judgement as a workload: the rules read these fields, never who wrote the loop.

A run stored before the workloads became scripts has a ``spec.json`` (its ``TrainingSpec``) instead: its fields
read the same. A value nobody recorded is ``None`` (no DataLoader: no worker count), never a default passed off as
seen; a switch nobody saw on reads off.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Mapping

from profilers.run.command import workload_of_command

PROFILER_WARMUP = 1  # the agent's one step between the unprofiled steps and the profiled ones
#: the defaults of the ``TrainingSpec`` an older run's ``spec.json`` was written from, for a field it left out
SPEC_DEFAULTS = {
    "warmup_steps": 3,
    "steps": 20,
    "batch_size": 32,
    "num_workers": 0,
    "world_size": 1,
}


@dataclass(frozen=True)
class RunConfig:
    """The settings of a run (see the module docs). ``steps``: the optimizer steps the run was to do;
    ``warmup_steps``: those its step time leaves out first; ``workload``: a sample workload's name."""

    workload: str | None = None
    num_workers: int | None = None
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetch_factor: int | None = None
    cache_decoded: bool = False
    batch_size: int | None = None
    precision: str = "fp32"
    compile: bool = False
    cuda_graphs: bool = False
    channels_last: bool = False
    optimizer_impl: str | None = None
    grad_accum_steps: int = 1
    activation_checkpointing: bool = False
    ddp_no_sync: bool = False
    grad_compression: str = "none"
    tf32: bool = False
    cudnn_benchmark: bool = False
    sdpa_attention: bool = False  # the agent replaced hand-written attention with SDPA in this run
    memory_budget_mb: float | None = None
    warmup_steps: int = 1
    steps: int | None = None
    world_size: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> RunConfig:
        """From any mapping of these names (others ignored; a value of the wrong type is left at its default)."""
        kw: dict[str, Any] = {}
        for f in fields(cls):
            value = values.get(f.name)
            if value is None:
                continue
            want = f.default
            if isinstance(want, bool) and isinstance(value, bool):
                kw[f.name] = value
            elif (
                isinstance(want, int)
                and not isinstance(want, bool)
                and isinstance(value, int)
                and not isinstance(value, bool)
            ):
                kw[f.name] = value
            elif (
                f.name in ("num_workers", "prefetch_factor", "batch_size", "steps")
                and isinstance(value, int)
                and not isinstance(value, bool)
            ):
                kw[f.name] = value
            elif (
                f.name == "memory_budget_mb"
                and isinstance(value, (int, float))
                and not isinstance(value, bool)
            ):
                kw[f.name] = float(value)
            elif isinstance(value, str) and f.name in (
                "workload",
                "precision",
                "optimizer_impl",
                "grad_compression",
            ):
                kw[f.name] = value
        return cls(**kw)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def run_config(run_dir: Path) -> RunConfig | None:
    """The run's configuration: its ``spec.json`` (a run stored before the workloads became scripts), else what
    the agent and the launcher recorded; ``None`` for a folder with neither (an upload, a run that never started)."""
    spec = _json(run_dir / "spec.json")
    if isinstance(spec, dict) and isinstance(spec.get("workload"), str):
        spec = {**SPEC_DEFAULTS, **spec}  # what a TrainingSpec held when a field was left out
        planned = spec.get("steps") if spec.get("epochs") is None else None
        return RunConfig.of({**spec, "steps": planned})
    injected, boot, launch = (
        _json(run_dir / name) for name in ("injected.json", "boot.json", "launch.json")
    )
    if not isinstance(launch, dict):
        return None
    settings = (injected or {}).get("settings") if isinstance(injected, dict) else None
    values: dict[str, Any] = dict(settings) if isinstance(settings, dict) else {}
    boot = boot if isinstance(boot, dict) else {}
    warmup = boot.get("warmup", PROFILER_WARMUP)
    if isinstance(warmup, int) and isinstance(boot.get("measure", 0), int):
        profile = boot.get("profile", launch.get("steps"))
        values["warmup_steps"] = max(warmup, 1)
        if isinstance(profile, int):
            values["steps"] = warmup + int(boot.get("measure", 0)) + PROFILER_WARMUP + profile
    values["memory_budget_mb"] = launch.get("memory_budget_mb")
    values["workload"] = workload_of_command(launch.get("command"))
    nodes, per_node = launch.get("nnodes"), launch.get("nproc_per_node")
    if isinstance(nodes, int) and isinstance(per_node, int):
        values["world_size"] = nodes * per_node
    return RunConfig.of(values)
