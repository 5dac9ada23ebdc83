"""Pinned host memory for batches: full-bandwidth, asynchronous host-to-device copies."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.fixes.base import ON_CPU, ON_CUDA, FixExample, FixSpec, Injection, const
from advisors.verdict import Bottleneck


def _pinned(f: Facts) -> bool:
    """The spec pins its batches, or (no spec) the trace's copies are all pinned."""
    return (f.spec is not None and f.spec.pin_memory) or (
        f.spec is None and f.pinned_copy > 0 and f.pageable_copy == 0
    )


FIX = FixSpec(
    id="pin_memory",
    title="Pinned host memory for batches",
    bottleneck=Bottleneck.DATA,
    applies_to="cuda",
    explanation="Pinned pages copy at full link bandwidth and allow non_blocking copies that overlap compute.",
    snippet="loader = DataLoader(ds, ..., pin_memory=True)\nx = x.to(device, non_blocking=True)",
    docs="https://pytorch.org/docs/stable/data.html#memory-pinning",
    effort="keyword",
    settings={"pin_memory": True},
    injection=Injection(const(pin_memory=True), "pin_memory", "dataloader"),
    done=_pinned,
    examples=(
        FixExample(ON_CUDA, knobs={"pin_memory": True}),
        FixExample(ON_CPU, skipped="acts on CUDA only"),
    ),
)
