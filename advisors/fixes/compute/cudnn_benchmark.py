"""cudnn.benchmark: cuDNN times its convolution algorithms once per shape and keeps the fastest."""

from __future__ import annotations

from dataclasses import replace

from advisors.fit import spec_says
from advisors.fixes.base import ON_CPU, ON_CUDA, FixExample, FixSpec, Injection, const
from advisors.verdict import Bottleneck

FIX = FixSpec(
    id="cudnn_benchmark",
    title="cudnn.benchmark",
    bottleneck=Bottleneck.COMPUTE,
    applies_to="cuda",
    explanation="cuDNN times its convolution algorithms once per input shape and keeps the fastest.",
    snippet="torch.backends.cudnn.benchmark = True",
    docs="https://pytorch.org/docs/stable/backends.html#torch.backends.cudnn.benchmark",
    effort="config",
    settings={"cudnn_benchmark": True},
    injection=Injection(const(cudnn_benchmark=True), "cudnn_benchmark"),
    conv_only=True,
    done=spec_says(lambda s: s.cudnn_benchmark),
    examples=(
        FixExample(ON_CUDA, knobs={"cudnn_benchmark": True}),
        FixExample(ON_CPU, skipped="CUDA only"),
        FixExample(
            replace(ON_CUDA, sites={"model_call": {"convolutions": 0}}), skipped="convolutions only"
        ),
    ),
)
