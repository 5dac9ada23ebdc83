"""Fused optimizer: one kernel updates every parameter."""

from __future__ import annotations

from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection, const
from advisors.verdict import Bottleneck

DOCS = "https://pytorch.org/docs/stable/optim.html#algorithms"

FIX = FixSpec(
    id="fused_optimizer",
    title="Fused optimizer",
    bottleneck=Bottleneck.COMPUTE,
    applies_to="any",
    explanation="One kernel updates every parameter instead of several per tensor (CUDA, and CPU for Adam, AdamW, "
    "SGD and Adagrad).",
    snippet="opt = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)",
    docs=DOCS,
    effort="keyword",
    settings={"optimizer_impl": "fused"},
    injection=Injection(const(optimizer_impl="fused"), "optimizer_impl", "optimizer"),
    done=lambda f: (
        (f.spec is not None and f.spec.optimizer_impl == "fused") or f.optimizer_impl == "fused"
    ),
    examples=(FixExample(ON_CPU, knobs={"optimizer_impl": "fused"}),),
)
