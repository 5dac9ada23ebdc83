"""Prefetch FSDP all-gathers: the next layer's all-gather runs under this layer's compute."""

from __future__ import annotations

from advisors.fixes.base import ON_CPU, ON_TWO_RANKS, FixExample, FixSpec
from advisors.verdict import Bottleneck

FIX = FixSpec(
    id="fsdp_prefetch",
    title="Prefetch FSDP all-gathers",
    bottleneck=Bottleneck.COMMUNICATION,
    applies_to="distributed",
    explanation="All-gather and reduce-scatter belong to sharded training (FSDP, ZeRO), not to DDP: no_sync and "
    "bucket sizes do not apply. Issue the next layer's all-gather before it is needed so it runs under compute, and "
    "keep weights gathered from forward to backward where memory allows.",
    snippet="from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel as FSDP\n"
    "model = FSDP(model, forward_prefetch=True, backward_prefetch=BackwardPrefetch.BACKWARD_PRE,\n"
    "             limit_all_gathers=True)\n"
    "# FSDP2: fully_shard(block, reshard_after_forward=False) keeps gathered weights for backward",
    docs="https://pytorch.org/docs/stable/fsdp.html",
    effort="code change",
    manual="FSDP prefetching is set where your model is sharded",
    examples=(
        FixExample(ON_TWO_RANKS, knobs={}),
        FixExample(ON_CPU, skipped="needs more than one rank"),
    ),
)
