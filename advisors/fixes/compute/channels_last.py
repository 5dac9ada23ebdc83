"""channels_last memory format: NHWC convolutions without layout transposes."""

from __future__ import annotations

import re
from dataclasses import replace

from advisors.bounds import Reach
from advisors.facts import Facts
from advisors.fit import spec_says
from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection, const
from advisors.verdict import Bottleneck

_CONV = re.compile(r"conv|wgrad|dgrad|fprop|implicit_convolve", re.IGNORECASE)


def convolutions(f: Facts) -> Reach | None:
    """Convolution time (GPU kernels, or the CPU's convolution operators) — *if the convolutions took no time at
    all*."""
    if not f.has_steps or f.b is None:
        return None
    total = float(f.b.total_step_ns) or 1.0
    if f.device == "gpu":
        k = f.b.kernels
        conv = (
            float(k.loc[k["name"].astype(str).str.contains(_CONV), "total_ns"].sum()) / total
            if len(k)
            else 0.0
        )
    else:
        ops = f.b.ops
        conv = (
            min(
                float(
                    ops.loc[
                        ops["name"].astype(str).str.match(r"aten::(mkldnn_)?convolution$"),
                        "total_ns",
                    ].sum()
                )
                / total,
                f.device_work,
            )
            if len(ops)
            else 0.0
        )
    return Reach(conv, f"convolutions ({100 * conv:.1f}% of the step) take no time at all")


FIX = FixSpec(
    id="channels_last",
    title="channels_last memory format",
    bottleneck=Bottleneck.COMPUTE,
    applies_to="any",
    explanation="NHWC layout: convolutions avoid layout transposes on Tensor Cores and oneDNN.",
    snippet="model = model.to(memory_format=torch.channels_last)\nx = x.to(memory_format=torch.channels_last)",
    docs="https://pytorch.org/tutorials/intermediate/memory_format_tutorial.html",
    effort="code change",
    settings={"channels_last": True},
    injection=Injection(const(channels_last=True), "channels_last", "model_call"),
    conv_only=True,
    done=spec_says(lambda s: s.channels_last),
    bound=convolutions,
    examples=(
        FixExample(
            replace(ON_CPU, sites={"model_call": {"convolutions": 3}}),
            knobs={"channels_last": True},
        ),
        FixExample(
            replace(ON_CPU, sites={"model_call": {"convolutions": 0}}), skipped="convolutions only"
        ),
    ),
)
