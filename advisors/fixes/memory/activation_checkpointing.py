"""Activation checkpointing: keep block inputs only, recompute activations during backward."""

from __future__ import annotations

from advisors.fit import spec_says
from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection, const
from advisors.verdict import Bottleneck

FIX = FixSpec(
    id="activation_checkpointing",
    title="Activation checkpointing",
    bottleneck=Bottleneck.MEMORY,
    applies_to="any",
    explanation="Keep only block inputs; recompute activations during backward (about one extra forward).",
    snippet="from torch.utils.checkpoint import checkpoint\n"
    "h = checkpoint(block, h, use_reentrant=False)   # for each block in forward",
    docs="https://pytorch.org/docs/stable/checkpoint.html",
    effort="code change",
    settings={"activation_checkpointing": True},
    alternatives=("grad_accumulation",),
    own_flag=Injection(const(activation_checkpointing=True), "activation_checkpointing"),
    manual="checkpointing wraps blocks inside your model's forward",
    done=spec_says(lambda s: s.activation_checkpointing),
    examples=(FixExample(ON_CPU, knobs={"activation_checkpointing": True}),),
)
