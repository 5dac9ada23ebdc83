"""foreach optimizer: multi-tensor updates, fewer and larger kernels per step."""

from __future__ import annotations

from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection, const
from advisors.fixes.compute.fused_optimizer import DOCS
from advisors.verdict import Bottleneck

FIX = FixSpec(
    id="foreach_optimizer",
    title="foreach optimizer",
    bottleneck=Bottleneck.COMPUTE,
    applies_to="any",
    explanation="Multi-tensor updates: fewer, larger kernels (or loops) per step.",
    snippet="opt = torch.optim.SGD(model.parameters(), lr=lr, foreach=True)",
    docs=DOCS,
    effort="keyword",
    settings={"optimizer_impl": "foreach"},
    injection=Injection(const(optimizer_impl="foreach"), "optimizer_impl", "optimizer"),
    done=lambda f: (
        (f.spec is not None and f.spec.optimizer_impl in ("foreach", "fused"))
        or f.optimizer_impl in ("foreach", "fused")
    ),
    examples=(FixExample(ON_CPU, knobs={"optimizer_impl": "foreach"}),),
)
