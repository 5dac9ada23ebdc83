"""Expandable allocator segments: the caching allocator grows segments instead of fragmenting."""

from __future__ import annotations

from advisors.fixes.base import ON_CPU, ON_CUDA, FixExample, FixSpec, Injection, const
from advisors.verdict import Bottleneck

FIX = FixSpec(
    id="expandable_segments",
    title="Expandable allocator segments",
    bottleneck=Bottleneck.MEMORY,
    applies_to="cuda",
    explanation="Lets the caching allocator grow segments instead of fragmenting and calling cudaMalloc again.",
    snippet="export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True   # before starting Python",
    docs="https://pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf",
    effort="config",
    injection=Injection(const(alloc_conf="expandable_segments:True"), "alloc_conf"),
    examples=(
        FixExample(ON_CUDA, knobs={"alloc_conf": "expandable_segments:True"}),
        FixExample(ON_CPU, skipped="acts on CUDA only"),
    ),
)
