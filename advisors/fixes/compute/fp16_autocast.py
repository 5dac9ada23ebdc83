"""fp16 mixed precision with a GradScaler, for GPUs without a bf16 fast path (pre-Ampere)."""

from __future__ import annotations

from advisors.fit import mixed_precision_on
from advisors.fixes.base import ON_CPU, ON_CUDA, FixExample, FixSpec, Injection, const
from advisors.fixes.compute.bf16_autocast import DOCS
from advisors.verdict import Bottleneck

FIX = FixSpec(
    id="fp16_autocast",
    title="fp16 mixed precision with GradScaler",
    bottleneck=Bottleneck.COMPUTE,
    applies_to="cuda",
    explanation="fp16 Tensor Core math where bf16 is missing (pre-Ampere); the GradScaler keeps small gradients "
    "alive.",
    snippet="scaler = torch.cuda.amp.GradScaler()\nwith torch.autocast('cuda', dtype=torch.float16):\n"
    "    loss = loss_fn(model(x), y)\nscaler.scale(loss).backward(); scaler.step(opt); scaler.update()",
    docs=DOCS,
    effort="code change",
    settings={"precision": "fp16"},
    injection=Injection(const(autocast="fp16"), "autocast", "model_call"),
    done=mixed_precision_on,
    examples=(
        FixExample(ON_CUDA, knobs={"autocast": "fp16"}),
        FixExample(ON_CPU, skipped="acts on CUDA only"),
    ),
)
