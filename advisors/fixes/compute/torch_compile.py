"""torch.compile: fused pointwise chains and better kernels, for a one-off compile."""

from __future__ import annotations

from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection, const
from advisors.verdict import Bottleneck

DOCS = "https://pytorch.org/docs/stable/generated/torch.compile.html"
COMPILE_SCRIPT = '''import argparse
import torch
parser = argparse.ArgumentParser()
parser.add_argument("--compile", action="store_true")
args = parser.parse_args()
model = torch.nn.Linear(2, 2)
if args.compile:
    model = torch.compile(model)
'''

FIX = FixSpec(
    id="torch_compile", title="torch.compile", bottleneck=Bottleneck.COMPUTE, applies_to="any",
    explanation="Fuses chains of pointwise ops into single kernels and picks better ones; pays a one-off compile.",
    snippet="model = torch.compile(model)",
    docs=DOCS, effort="config", settings={"compile": True},
    alternatives=("bf16_autocast", "channels_last"),
    injection=Injection(const(compile=True), "compile", "model_call"),
    done=lambda f: f.compiled,
    examples=(FixExample(ON_CPU, knobs={"compile": True}),
              FixExample(ON_CPU, script=COMPILE_SCRIPT, argv=(), changed=("--compile",))))
