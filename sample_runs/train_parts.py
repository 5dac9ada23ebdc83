"""The training script's helpers: where to train, what a flag cannot do here, checkpointed blocks, the rate's
warm-up, gradient compression under DDP, and one command for every rank.

Gradient compression uses the stock DDP comm hooks, with one fallback on gloo (:mod:`sample_runs.comm_hook`).
"""

from __future__ import annotations

import argparse
import functools
import platform
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.checkpoint import checkpoint

from sample_runs.base import Parts

CUDA_ONLY = ("tf32", "cudnn_benchmark", "pin_memory", "cuda_graphs")


def pick_device(asked: str, local_rank: int) -> torch.device:
    """``auto`` means CUDA when present; each rank takes its local GPU. SystemExit (one line) for missing CUDA."""
    want = ("cuda" if torch.cuda.is_available() else "cpu") if asked == "auto" else asked
    if want == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit(
                "error: --device cuda, but this machine has no usable CUDA device (use auto or cpu)"
            )
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        return device
    return torch.device("cpu")


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def cannot_act(
    args: argparse.Namespace,
    parts: Parts,
    device: torch.device,
    world_size: int,
    backend: str | None,
) -> list[str]:
    """What the flags of ``args`` cannot do on this workload, device and world: said, never pretended."""
    out: list[str] = []
    cuda = device.type == "cuda"
    if not cuda:
        out += [
            f"{knob}=True has no effect on {device.type} (CUDA only); ignored"
            for knob in CUDA_ONLY
            if getattr(args, knob)
        ]
        if args.precision == "fp16":
            out.append(
                "precision='fp16' on CPU runs fp16 autocast with a CPU GradScaler; bf16 is usually faster"
            )
    elif args.cudnn_benchmark and not any(
        isinstance(m, nn.modules.conv._ConvNd) for m in parts.model.modules()
    ):
        out.append(
            f"cudnn_benchmark=True has no effect on {args.workload} (no convolutions to tune); ignored"
        )
    if world_size == 1:
        out += [
            f"{knob}={getattr(args, knob)!r} acts on DDP only; ignored with world_size=1"
            for knob in ("ddp_no_sync", "grad_compression")
            if getattr(args, knob) not in (False, "none")
        ]
    if backend == "gloo" and args.grad_compression == "fp16":
        out.append(
            "grad_compression='fp16' on gloo: gloo sums fp16 in software, usually slower than fp32 on CPU; "
            "'bf16' halves the bytes and is fast there"
        )
    if args.ddp_no_sync and args.grad_accum_steps == 1:
        out.append(
            "ddp_no_sync=True has no effect with grad_accum_steps=1 (every micro-batch syncs)"
        )
    if args.cache_decoded and not parts.decodes_samples:
        out.append(
            f"cache_decoded=True: {args.workload} keeps its samples in memory already; the cache saves no "
            "decode work"
        )
    if args.channels_last and not parts.channels_last:
        out.append(
            f"channels_last=True has no effect on {args.workload} (no 4-D activations); ignored"
        )
    if args.activation_checkpointing and not parts.checkpoint_blocks:
        out.append(
            f"activation_checkpointing=True: {args.workload} declares no checkpoint blocks; ignored"
        )
    if (
        args.cuda_graphs
        and cuda
        and args.compile
        and args.compile_mode not in ("reduce-overhead", "max-autotune")
    ):
        out.append(
            f"cuda_graphs=True overrides compile_mode={args.compile_mode!r} with 'reduce-overhead'"
        )
    return out


def checkpointed(module: nn.Module) -> nn.Module:
    """Route ``module``'s forward through non-reentrant activation checkpointing (keeps only its inputs)."""
    inner_forward = module.forward

    @functools.wraps(inner_forward)
    def forward(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return inner_forward(*args, **kwargs)
        return checkpoint(inner_forward, *args, use_reentrant=False, **kwargs)

    module.forward = forward
    return module


def warm_up(
    optimizer: torch.optim.Optimizer, lr: float, steps: int, start: float | None, step: int
) -> None:
    """Linear warm-up over the first ``steps`` optimizer steps, then ``lr``: from ``start`` (Goyal et al. 2017's
    gradual warm-up starts at the small batch's rate and reaches k × it) or, without one, from 0."""
    if steps <= 0 or step > steps:
        return
    first = start if start is not None else 0.0
    rate = first + (lr - first) * min(1.0, (step + 1) / steps)
    for group in optimizer.param_groups:
        group["lr"] = rate


def compression_hook(kind: str, backend: str) -> Callable[..., Any]:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    from sample_runs.comm_hook import bf16_allreduce_hook

    if kind == "fp16":
        return default_hooks.fp16_compress_hook
    return default_hooks.bf16_compress_hook if backend == "nccl" else bf16_allreduce_hook


def same_command(argv: list[str], rank: int, world_size: int) -> None:
    """Every rank must train the same thing. On several machines each node starts its own command, and a
    difference (another ``--steps``, batch or size) would not fail: it would hang in a collective or silently train
    something else. One small all-gather at setup names it instead (SystemExit, one line)."""
    got: list[Any] = [None] * world_size
    dist.all_gather_object(got, list(argv))
    for other, theirs in enumerate(got):
        if theirs != got[0]:
            raise SystemExit(
                f"error: rank {other} runs another command than rank 0 ({' '.join(theirs)} vs "
                f"{' '.join(got[0])}); start every node with the same command"
            )
