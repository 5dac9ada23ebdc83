"""Smaller DDP buckets: the first bucket fills earlier in backward, so the all-reduce overlaps more of it."""

from __future__ import annotations

from advisors.fixes.base import ON_CPU, ON_TWO_RANKS, FixExample, FixSpec, Injection, const
from advisors.fixes.communication.ddp_no_sync import DDP_DOCS
from advisors.verdict import Bottleneck, Relative

FIX = FixSpec(
    id="ddp_bucket_size",
    title="Smaller DDP buckets",
    bottleneck=Bottleneck.COMMUNICATION,
    applies_to="distributed",
    explanation="The first bucket fills earlier in backward, so all-reduce overlaps more of it.",
    snippet="ddp = DistributedDataParallel(model, bucket_cap_mb=5)",
    docs=DDP_DOCS,
    effort="keyword",
    settings={"bucket_cap_mb": Relative(0.25)},
    alternatives=("ddp_no_sync", "grad_compression", "ddp_static_graph"),
    injection=Injection(const(bucket_cap_mb_factor=0.25), "bucket_cap_mb_factor", "ddp"),
    examples=(
        FixExample(ON_TWO_RANKS, knobs={"bucket_cap_mb_factor": 0.25}),
        FixExample(ON_CPU, skipped="needs more than one rank"),
    ),
)
