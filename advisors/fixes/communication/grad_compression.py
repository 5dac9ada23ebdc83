"""bf16 gradient compression hook: half the bytes on the wire."""

from __future__ import annotations

from advisors.fit import spec_says
from advisors.fixes.base import ON_CPU, ON_TWO_RANKS, FixExample, FixSpec, Injection, const
from advisors.verdict import Bottleneck

FIX = FixSpec(
    id="grad_compression",
    title="bf16 gradient compression hook",
    bottleneck=Bottleneck.COMMUNICATION,
    applies_to="distributed",
    explanation="All-reduce gradients in bf16: half the bytes on the wire, decompressed before the optimizer.",
    snippet="from torch.distributed.algorithms.ddp_comm_hooks import default_hooks\n"
    "ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)",
    docs="https://pytorch.org/docs/stable/ddp_comm_hooks.html",
    effort="code change",
    settings={"grad_compression": "bf16"},
    alternatives=("ddp_no_sync", "ddp_bucket_size"),
    injection=Injection(const(grad_compression="bf16"), "grad_compression", "ddp"),
    done=spec_says(lambda s: s.grad_compression != "none"),
    examples=(
        FixExample(ON_TWO_RANKS, knobs={"grad_compression": "bf16"}),
        FixExample(ON_CPU, skipped="needs more than one rank"),
    ),
)
