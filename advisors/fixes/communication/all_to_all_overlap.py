"""Overlap and shrink the all-to-all of embedding rows or routed tokens (recommendation models, MoE)."""

from __future__ import annotations

from advisors.fixes.base import ON_CPU, ON_TWO_RANKS, FixExample, FixSpec
from advisors.verdict import Bottleneck

FIX = FixSpec(
    id="all_to_all_overlap",
    title="Overlap and shrink the all-to-all",
    bottleneck=Bottleneck.COMMUNICATION,
    applies_to="distributed",
    explanation="All-to-all and send/recv move embedding rows (recommendation models) or routed tokens (mixture of "
    "experts), not gradients: no_sync accumulation and DDP buckets cannot touch them. Start the next batch's "
    "exchange under this batch's dense compute, and send fewer bytes (reduced-precision embedding comms; for MoE a "
    "lower capacity factor and experts placed within a node).",
    snippet="# TorchRec: pipeline the sparse all-to-all of batch i+1 under the dense compute of batch i\n"
    "from torchrec.distributed.train_pipeline import TrainPipelineSparseDist\n"
    "pipeline = TrainPipelineSparseDist(model, optimizer, device)\n"
    "it = iter(loader)\nfor _ in range(steps):\n    pipeline.progress(it)\n"
    "# fewer bytes: QCommsConfig(forward_precision=CommType.FP16, backward_precision=CommType.BF16)\n"
    "# MoE: capacity_factor=1.0 and expert-parallel groups inside a node",
    docs="https://pytorch.org/torchrec/",
    effort="loop rewrite",
    manual="pipelining the all-to-all changes how your loop drives batches (e.g. TorchRec's pipeline)",
    examples=(
        FixExample(ON_TWO_RANKS, knobs={}),
        FixExample(ON_CPU, skipped="needs more than one rank"),
    ),
)
