"""Fewer host-device syncs: no .item() in the loop; read running sums every N steps."""

from __future__ import annotations

from advisors.fixes.base import ON_CPU, ON_CUDA, FixExample, FixSpec
from advisors.verdict import Bottleneck

FIX = FixSpec(
    id="avoid_syncs",
    title="Fewer host-device syncs",
    bottleneck=Bottleneck.HOST,
    applies_to="cuda",
    explanation="Every .item() drains the GPU queue; keep running sums on the device and read them every N steps.",
    snippet="running = running + loss.detach()        # no .item() in the loop\n"
    "if step % 50 == 0: print(running.item() / 50); running.zero_()",
    docs="https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    effort="loop rewrite",
    manual="the .item() calls are in your loop",
    examples=(FixExample(ON_CUDA, knobs={}), FixExample(ON_CPU, skipped="acts on CUDA only")),
)
