"""Distributed plumbing: who am I under torchrun, the process group, DDP with its knobs, and result gathering.

Gradient compression uses the stock DDP comm hooks (``fp16_compress_hook`` / ``bf16_compress_hook``), with one
documented fallback: torch's ``bf16_compress_hook`` refuses anything but NCCL ≥ 2.10 (or XCCL), yet gloo
all-reduces bf16 tensors correctly — and, on CPU, twice as fast as fp32 (measured with torch 2.13: 16 MB of
fp32 gradients 20.8 ms, as fp16 20.2 ms — gloo sums fp16 in software —, as bf16 10.8 ms). So on gloo
``grad_compression="bf16"`` uses :func:`bf16_allreduce_hook`, the same algorithm without the backend check.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from profilers.errors import SpecError
from stepwise_agent.inject.comm import bf16_allreduce_hook
from profilers.run.spec import TrainingSpec


@dataclass(frozen=True)
class DistInfo:
    """This process's place in the job (``world_size == 1`` and ``launched == False`` for a plain run)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    launched: bool = False  # started by torchrun (RANK/WORLD_SIZE in the environment)
    node_rank: int = 0  # torchrun's GROUP_RANK: which node of a multi-node run this process runs on

    @classmethod
    def from_env(cls, environ: Any = os.environ) -> DistInfo:
        if "RANK" not in environ or "WORLD_SIZE" not in environ:
            return cls()
        return cls(rank=int(environ["RANK"]), world_size=int(environ["WORLD_SIZE"]),
                   local_rank=int(environ.get("LOCAL_RANK", 0)),
                   local_world_size=int(environ.get("LOCAL_WORLD_SIZE", 1)), launched=True,
                   node_rank=int(environ.get("GROUP_RANK", 0)))

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def check_world(spec: TrainingSpec, info: DistInfo) -> None:
    """The spec's world must be the one torchrun started (a mismatch would silently change the batch)."""
    if spec.world_size > 1 and not info.launched:
        raise SpecError(f"world_size={spec.world_size} needs torchrun (the runner starts it); "
                        "this worker was started as a single process")
    if info.launched and info.world_size != spec.world_size:
        raise SpecError(f"spec.world_size={spec.world_size} but torchrun started {info.world_size} process(es)")


def check_same_spec(spec: TrainingSpec, info: DistInfo) -> None:
    """Every rank must train the same spec. On several machines each node's runner builds the spec from its own
    command line, and a difference (another ``--steps``, batch size or workload size) would not fail: it would
    hang in a collective or silently train something else. One small all-gather at setup names it instead."""
    if not info.distributed or not dist.is_initialized():
        return
    texts: list[Any] = [None] * info.world_size
    dist.all_gather_object(texts, spec.to_json())
    problem = spec_mismatch(texts)
    if problem is not None:
        raise SpecError(problem)


def spec_mismatch(spec_texts: list[str]) -> str | None:
    """The first rank whose spec (JSON) differs from rank 0's, with the fields that differ; None when all agree."""
    for rank, text in enumerate(spec_texts):
        if text != spec_texts[0]:
            diff = TrainingSpec.from_json(spec_texts[0]).describe_diff(TrainingSpec.from_json(text))
            fields = ", ".join(f"{name}={a!r} vs {b!r}" for name, (a, b) in diff.items())
            return (f"rank {rank} runs another spec than rank 0 ({fields}); "
                    "start every node with the same command")
    return None


def resolve_backend(spec: TrainingSpec, device: torch.device) -> str:
    if spec.backend != "auto":
        return spec.backend
    return "nccl" if device.type == "cuda" else "gloo"


def init_process_group(spec: TrainingSpec, info: DistInfo, device: torch.device) -> str:
    backend = resolve_backend(spec, device)
    if backend == "nccl" and device.type != "cuda":
        raise SpecError("backend='nccl' needs CUDA devices; use 'gloo' on CPU")
    kwargs: dict[str, Any] = {}
    if device.type == "cuda":
        kwargs["device_id"] = device  # binds NCCL to this rank's GPU up front
    dist.init_process_group(backend=backend, rank=info.rank, world_size=info.world_size, **kwargs)
    return backend


def wrap_ddp(model: nn.Module, spec: TrainingSpec, device: torch.device, backend: str) -> DistributedDataParallel:
    """DDP with ``bucket_cap_mb`` and, if asked, a gradient compression comm hook."""
    ids = [device.index] if device.type == "cuda" else None
    ddp = DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=spec.bucket_cap_mb)
    if spec.grad_compression == "fp16":
        ddp.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)
    elif spec.grad_compression == "bf16":
        hook = default_hooks.bf16_compress_hook if backend == "nccl" else bf16_allreduce_hook
        ddp.register_comm_hook(state=None, hook=hook)
    return ddp


def gather_floats(values: list[float], info: DistInfo) -> list[list[float]]:
    """Every rank's ``values`` (rank order); a plain run returns ``[values]``."""
    if not info.distributed or not dist.is_initialized():
        return [values]
    out: list[Any] = [None] * info.world_size
    dist.all_gather_object(out, values)
    return [list(v) for v in out]


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
