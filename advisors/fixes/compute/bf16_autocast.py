"""bf16 mixed precision: matmuls and convolutions in bf16, reductions in fp32, no loss scaling."""

from __future__ import annotations

from advisors.fit import mixed_precision_on
from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection, const
from advisors.verdict import Bottleneck

DOCS = "https://pytorch.org/docs/stable/amp.html"
AMP_SCRIPT = """import argparse
import torch
parser = argparse.ArgumentParser()
parser.add_argument("--amp", action="store_true")
args = parser.parse_args()
with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=args.amp):
    pass
"""

FIX = FixSpec(
    id="bf16_autocast",
    title="bf16 mixed precision",
    bottleneck=Bottleneck.COMPUTE,
    applies_to="any",
    explanation="Matmuls and convolutions in bf16 (Tensor Cores / AMX); reductions stay in fp32. No loss scaling "
    "needed.",
    snippet="with torch.autocast(device_type=device.type, dtype=torch.bfloat16):\n"
    "    loss = loss_fn(model(x), y)\nloss.backward()",
    docs=DOCS,
    effort="code change",
    settings={"precision": "bf16"},
    alternatives=("tf32", "torch_compile", "fp16_autocast"),
    injection=Injection(const(autocast="bf16"), "autocast", "model_call"),
    done=mixed_precision_on,
    examples=(
        FixExample(ON_CPU, knobs={"autocast": "bf16"}),
        FixExample(ON_CPU, script=AMP_SCRIPT, argv=(), changed=("--amp",)),
    ),
)
