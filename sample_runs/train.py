"""Train a sample workload: ``python -m sample_runs.train WORKLOAD [--size tiny|bench] [--batch-size N] …``.

An ordinary training script — argparse, a DataLoader, the model, an optimizer, autocast, DDP from torchrun's
environment — with nothing of Stepwise in it: run it alone, under ``torchrun``, or under Stepwise's launcher,
which finds its steps as it finds a user's. Every knob is a flag (``sample_runs.options``, ``--help`` lists them);
a workload's size sets the defaults it recommends. A flag that cannot act here (``--tf32`` on a CPU) is warned
about, never pretended.

One optimizer step trains ``--batch-size`` samples per rank, cut into ``--grad-accum-steps`` micro-batches (the
same samples in the same order whatever the cut); the loss of each micro-batch is divided by their number, so a
step's gradient is the whole batch's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from sample_runs import get_workload, options
from sample_runs.base import LossFn
from sample_runs.data import EpochSampler, SharedSampleCache, already_collated, returns_batch
from sample_runs.train_parts import (
    cannot_act,
    checkpointed,
    compression_hook,
    pick_device,
    same_command,
    warm_up,
)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
LOG_EVERY = 10


@dataclass
class Training:
    """What a run trains with, built from the arguments by :func:`setup`; :func:`train` trains it."""

    args: argparse.Namespace
    device: torch.device
    model: nn.Module
    ddp: DistributedDataParallel | None
    optimizer: torch.optim.Optimizer
    loader: DataLoader[Any]
    sampler: EpochSampler
    loss_fn: LossFn
    scaler: torch.amp.GradScaler | None
    total_steps: int
    rank: int = 0


def setup(args: argparse.Namespace, argv: list[str] | None = None) -> Training:
    """Device, process group (under torchrun), model, optimizer and data, every flag of ``args`` applied."""
    rank, world_size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    device = pick_device(args.device, int(os.environ.get("LOCAL_RANK", "0")))
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
        torch.backends.cudnn.benchmark = args.cudnn_benchmark
    backend = None
    if world_size > 1:
        backend = ("nccl" if cuda else "gloo") if args.backend == "auto" else args.backend
        dist.init_process_group(backend=backend, device_id=device if cuda else None)
        same_command(sys.argv[1:] if argv is None else list(argv), rank, world_size)
    torch.manual_seed(
        args.seed
    )  # identical initial weights on every rank and in every run of one seed
    parts = get_workload(args.workload).build(
        args.size, args.params, seed=args.seed, device=device.type, rank=rank
    )
    for note in cannot_act(args, parts, device, world_size, backend):
        warnings.warn(note, stacklevel=1)

    model = parts.model.to(device)
    if args.channels_last and parts.channels_last:
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    if args.activation_checkpointing:
        for name in parts.checkpoint_blocks:
            checkpointed(model.get_submodule(name))
    ddp = None
    if world_size > 1:
        ddp = model = DistributedDataParallel(
            model, device_ids=[device.index] if cuda else None, bucket_cap_mb=args.bucket_cap_mb
        )
        if args.grad_compression != "none":
            ddp.register_comm_hook(None, compression_hook(args.grad_compression, backend or "gloo"))

    foreach = args.optimizer_impl == "foreach" or None  # None: torch's own choice
    fused = args.optimizer_impl == "fused" or None
    if args.optimizer == "adam":
        optimizer: torch.optim.Optimizer = torch.optim.Adam(
            model.parameters(), lr=args.lr, foreach=foreach, fused=fused
        )
    elif args.optimizer == "adamw":
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, foreach=foreach, fused=fused)
    else:
        optimizer = torch.optim.SGD(
            model.parameters(), lr=args.lr, momentum=0.9, foreach=foreach, fused=fused
        )
    if args.compile or (args.cuda_graphs and cuda):
        mode = "reduce-overhead" if args.cuda_graphs and cuda else args.compile_mode
        model = torch.compile(model, mode=None if mode == "default" else mode)  # type: ignore[assignment]

    dataset = parts.dataset
    if args.cache_decoded:
        dataset = SharedSampleCache(dataset, len(dataset))  # type: ignore[arg-type]
    sampler = EpochSampler(len(dataset), args.batch_size, args.seed, rank, world_size)  # type: ignore[arg-type]
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size // args.grad_accum_steps,
        sampler=sampler,
        num_workers=args.num_workers,
        pin_memory=args.pin_memory and cuda,
        persistent_workers=args.persistent_workers,
        prefetch_factor=args.prefetch_factor,
        collate_fn=already_collated if returns_batch(dataset) else None,
    )
    scaler = (
        torch.amp.GradScaler(device.type) if args.precision == "fp16" else None
    )  # fp16 underflows unscaled
    total = args.steps if args.epochs is None else args.epochs * sampler.steps_per_epoch
    return Training(
        args, device, model, ddp, optimizer, loader, sampler, parts.loss_fn, scaler, total, rank
    )


def train(t: Training) -> list[float]:
    """Train ``t.total_steps`` optimizer steps; returns each step's loss (the batch's mean)."""
    args, model, optimizer, scaler = t.args, t.model, t.optimizer, t.scaler
    pinned = args.pin_memory and t.device.type == "cuda"
    losses: list[float] = []
    model.train()
    step, epoch = 0, 0
    while step < t.total_steps:
        t.sampler.set_epoch(epoch)
        step_loss = torch.zeros((), device=t.device)
        for i, (x, y) in enumerate(t.loader):
            x, y = x.to(t.device, non_blocking=pinned), y.to(t.device, non_blocking=pinned)
            if args.channels_last and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
            last = (i + 1) % args.grad_accum_steps == 0
            # all but the last micro-batch of a step skip the all-reduce: gradients accumulate locally
            sync = (
                t.ddp.no_sync()
                if t.ddp is not None and args.ddp_no_sync and not last
                else contextlib.nullcontext()
            )
            with sync:
                with torch.autocast(
                    t.device.type, dtype=DTYPES[args.precision], enabled=args.precision != "fp32"
                ):
                    loss = t.loss_fn(model(x), y) / args.grad_accum_steps
                (scaler.scale(loss) if scaler is not None else loss).backward()
            step_loss += loss.detach().float()
            if (i + 1) % args.grad_accum_steps == 0:
                warm_up(optimizer, args.lr, args.lr_warmup_steps, args.lr_warmup_from, step)
                if scaler is not None:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(float(step_loss))
                step, step_loss = step + 1, torch.zeros((), device=t.device)
                if t.rank == 0 and (step % LOG_EVERY == 0 or step == t.total_steps):
                    print(f"step {step}/{t.total_steps} loss {losses[-1]:.4f}", flush=True)
                if step >= t.total_steps:
                    break
        epoch += 1
    return losses


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, its size's settings as defaults, every value checked (exit 2 with one line if not)."""
    parser = options.parser_for(argv)
    return options.checked(parser, parser.parse_args(argv))


def main(argv: list[str] | None = None) -> None:
    t = setup(parse_args(argv), argv)
    train(t)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
