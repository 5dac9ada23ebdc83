"""Early stopping: stop when the validation metric no longer improves (run time saved, not step time)."""

from __future__ import annotations

from advisors.fixes.base import ON_CPU, FixExample, FixSpec
from advisors.verdict import Bottleneck

FIX = FixSpec(
    id="early_stopping",
    title="Early stopping",
    bottleneck=Bottleneck.COMPUTE,
    applies_to="any",
    explanation="Stop when the validation metric has not improved for `patience` evaluations.",
    snippet="if val_loss < best - min_delta: best, bad = val_loss, 0\nelse:\n    bad += 1\n"
    "    if bad >= patience: break",
    docs="https://lightning.ai/docs/pytorch/stable/common/early_stopping.html",
    effort="code change",
    manual="stopping early needs your validation loop",
    examples=(FixExample(ON_CPU, knobs={}),),
)
