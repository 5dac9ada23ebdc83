"""channels_last memory format: NHWC convolutions without layout transposes."""

from __future__ import annotations

from dataclasses import replace

from advisors.fit import spec_says
from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection, const
from advisors.verdict import Bottleneck

FIX = FixSpec(
    id="channels_last", title="channels_last memory format", bottleneck=Bottleneck.COMPUTE, applies_to="any",
    explanation="NHWC layout: convolutions avoid layout transposes on Tensor Cores and oneDNN.",
    snippet="model = model.to(memory_format=torch.channels_last)\nx = x.to(memory_format=torch.channels_last)",
    docs="https://pytorch.org/tutorials/intermediate/memory_format_tutorial.html", effort="code change",
    settings={"channels_last": True},
    injection=Injection(const(channels_last=True), "channels_last", "model_call"), conv_only=True,
    done=spec_says(lambda s: s.channels_last),
    examples=(FixExample(replace(ON_CPU, sites={"model_call": {"convolutions": 3}}), knobs={"channels_last": True}),
              FixExample(replace(ON_CPU, sites={"model_call": {"convolutions": 0}}), skipped="convolutions only")))
