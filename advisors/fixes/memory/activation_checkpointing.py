"""Activation checkpointing: keep block inputs only, recompute activations during backward.

The script's own switch first (``--activation-checkpointing``, a sample workload's flag); without
one, the agent checkpoints the repeated block that kept the most activation memory for backward in
the last run (``checkpoint_modules``, :mod:`stepwise_agent.inject.checkpoint`), named as the run's
per-module record groups it (``blocks.*``). A run without such a record, or whose repeated blocks
keep little of the model's activations, has nothing to inject.
"""

from __future__ import annotations

from typing import Any

from advisors.fit import spec_says
from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection, const
from advisors.fixes.context import ScriptContext
from advisors.verdict import Bottleneck
from profilers.layers import LayerRow, Layers
from profilers.layers.saved import holders

#: a block worth checkpointing keeps at least this share of the model's saved activation bytes
MIN_SHARE = 0.2


def heaviest_block(ctx: ScriptContext) -> dict[str, Any] | None:
    """``checkpoint_modules`` for the repeated block keeping the most activation memory (``None``:
    the last run named none worth it)."""
    top = holders(Layers(rows=ctx.layers, source="agent"), 1, repeated=True)
    if not top or (top[0].share is not None and top[0].share < MIN_SHARE):
        return None
    return {"checkpoint_modules": top[0].row.name}


def _row(name: str, parent: str | None, instances: int, mb: int) -> LayerRow:
    return LayerRow(
        name=name,
        parent=parent,
        module_class="Block" if instances > 1 else "Net",
        instances=instances,
        calls=float(instances),
        forward_ms=1.0,
        backward_ms=2.0,
        share=0.5,
        saved_bytes=mb * 1024**2,
        params=1000,
        class_where="model.py:12",
        forward_where="model.py:20",
    )


#: a run whose six blocks keep 600 of the model's 800 MB (the head 200)
WITH_BLOCKS = ScriptContext(
    device="cpu",
    cores=4,
    layers=(
        _row("Net", None, 1, 800),
        _row("blocks", "Net", 1, 600),
        _row("blocks.*", "blocks", 6, 600),
        _row("blocks.*.mlp", "blocks.*", 6, 400),
        _row("head", "Net", 1, 200),
    ),
)
#: its blocks keep 100 of 800 MB: checkpointing them frees little
LIGHT_BLOCKS = ScriptContext(
    device="cpu",
    cores=4,
    layers=(
        _row("Net", None, 1, 800),
        _row("blocks.*", "Net", 6, 100),
        _row("head", "Net", 1, 700),
    ),
)

FIX = FixSpec(
    id="activation_checkpointing",
    title="Activation checkpointing",
    bottleneck=Bottleneck.MEMORY,
    applies_to="any",
    explanation="Keep only block inputs; recompute activations during backward (about one extra forward).",
    snippet="from torch.utils.checkpoint import checkpoint\n"
    "h = checkpoint(block, h, use_reentrant=False)   # for each block in forward",
    docs="https://pytorch.org/docs/stable/checkpoint.html",
    effort="code change",
    settings={"activation_checkpointing": True},
    alternatives=("grad_accumulation",),
    own_flag=Injection(const(activation_checkpointing=True), "activation_checkpointing"),
    injection=Injection(heaviest_block, "checkpoint_modules", "checkpoint"),
    empty_why="no per-module record of the last run names a repeated block that keeps most of the "
    "activations: checkpointing wraps blocks inside your model's forward",
    done=spec_says(lambda s: s.activation_checkpointing),
    examples=(
        FixExample(WITH_BLOCKS, knobs={"checkpoint_modules": "blocks.*"}),
        FixExample(LIGHT_BLOCKS, knobs={}),
        FixExample(ON_CPU, knobs={}),
    ),
)
