"""Quarter-size micro-batches with gradient accumulation, when halving them is not enough."""

from __future__ import annotations

from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection, Times, const
from advisors.fixes.memory.grad_accumulation import DOCS, MANUAL
from advisors.verdict import Bottleneck, Relative

FIX = FixSpec(
    id="grad_accumulation_x4",
    title="Quarter-size micro-batches with gradient accumulation",
    bottleneck=Bottleneck.MEMORY,
    applies_to="any",
    explanation="Same samples per optimizer step, a quarter of the activations alive at once (when halving is not "
    "enough).",
    snippet="k = 4  # micro-batches per optimizer step; the loader yields B/k samples\n"
    "for i, (x, y) in enumerate(loader):\n    (loss_fn(model(x), y) / k).backward()\n"
    "    if (i + 1) % k == 0:\n        opt.step(); opt.zero_grad()",
    docs=DOCS,
    effort="loop rewrite",
    settings={"grad_accum_steps": Relative(4)},
    alternatives=("activation_checkpointing",),
    own_flag=Injection(const(grad_accum_steps=Times(4)), "grad_accum_steps"),
    manual=MANUAL,
    examples=(FixExample(ON_CPU, knobs={"grad_accum_steps": Times(4)}),),
)
