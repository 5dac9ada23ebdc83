"""DDP static_graph: the same graph every step, so DDP skips the unused-parameter search and overlaps more."""

from __future__ import annotations

from advisors.fixes.base import ON_CPU, ON_TWO_RANKS, FixExample, FixSpec, Injection, const
from advisors.fixes.communication.ddp_no_sync import DDP_DOCS
from advisors.verdict import Bottleneck

FIX = FixSpec(
    id="ddp_static_graph",
    title="DDP static_graph",
    bottleneck=Bottleneck.COMMUNICATION,
    applies_to="distributed",
    explanation="Tells DDP the graph is the same every step: it skips searching for unused parameters and can "
    "overlap more of the all-reduce with backward.",
    snippet="ddp = DistributedDataParallel(model, static_graph=True)",
    docs=DDP_DOCS,
    effort="keyword",
    injection=Injection(const(static_graph=True), "static_graph", "ddp"),
    examples=(
        FixExample(ON_TWO_RANKS, knobs={"static_graph": True}),
        FixExample(ON_CPU, skipped="needs more than one rank"),
    ),
)
