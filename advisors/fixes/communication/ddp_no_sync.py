"""Accumulate under DDP no_sync: k micro-batches per optimizer step, one all-reduce per step."""

from __future__ import annotations

from advisors.fit import spec_says
from advisors.fixes.base import ON_CPU, ON_TWO_RANKS, FixExample, FixSpec, Injection, Times, const
from advisors.verdict import Bottleneck, Relative

DDP_DOCS = (
    "https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html"
)

FIX = FixSpec(
    id="ddp_no_sync",
    title="Accumulate under DDP no_sync",
    bottleneck=Bottleneck.COMMUNICATION,
    applies_to="distributed",
    explanation="Same micro-batch, k micro-batches per optimizer step, one all-reduce per step: k× fewer bytes per "
    "sample.",
    snippet="for i, (x, y) in enumerate(loader):\n    last = (i + 1) % k == 0\n"
    "    with (contextlib.nullcontext() if last else ddp.no_sync()):\n"
    "        (loss_fn(ddp(x), y) / k).backward()\n    if last:\n        opt.step(); opt.zero_grad()",
    docs=DDP_DOCS + "#torch.nn.parallel.DistributedDataParallel.no_sync",
    effort="loop rewrite",
    settings={"ddp_no_sync": True, "grad_accum_steps": Relative(4), "batch_size": Relative(4)},
    alternatives=("grad_compression", "ddp_bucket_size"),
    # the micro-batch stays: k of them per step, one all-reduce
    own_flag=Injection(
        const(ddp_no_sync=True, grad_accum_steps=Times(4), batch_size=Times(4)), "ddp_no_sync"
    ),
    manual="no_sync accumulation changes the loop (several backwards per all-reduce)",
    done=spec_says(lambda s: s.ddp_no_sync),
    examples=(
        FixExample(
            ON_TWO_RANKS,
            knobs={"ddp_no_sync": True, "grad_accum_steps": Times(4), "batch_size": Times(4)},
        ),
        FixExample(ON_CPU, skipped="needs more than one rank"),
    ),
)
