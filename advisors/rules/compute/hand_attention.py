"""COMP006 — attention written by hand (a softmax between two matmuls) in one module takes a real
share of the step."""

from __future__ import annotations

from dataclasses import replace

from advisors.facts import Facts
from advisors.observation import Observation
from advisors.fixes import already_done
from advisors.fixes.compute.sdpa_attention import attention_share
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation
from advisors.verdict import Bottleneck, Finding
from profilers.layers import LayerRow, Layers

PATTERN = "matmul → scale → mask → softmax → matmul"


def _run(share: float, pattern: str | None, compiled: bool = False) -> Observation:
    """A CPU run whose per-module record holds one block with an attention module of ``share``."""

    def row(name: str, parent: str | None, cls: str, s: float, hand: str | None) -> LayerRow:
        return LayerRow(
            name=name,
            parent=parent,
            module_class=cls,
            instances=2,
            calls=2.0,
            forward_ms=40 * s,
            backward_ms=60 * s,
            share=s,
            saved_bytes=None,
            params=1000,
            class_where="gpt.py:12",
            forward_where="gpt.py:23",
            hand_attention=hand,
        )

    layers = Layers(
        rows=(
            row("blocks.*", None, "Block", 0.9, None),
            row("blocks.*.attn", "blocks.*", "CausalSelfAttention", share, pattern),
        ),
        source="agent",
    )
    ops = {"CompiledFunction": 0.5} if compiled else {}
    obs = observation({"forward": 0.4, "backward": 0.5}, device="cpu", ops=ops)
    return replace(obs, layers=layers)


class HandAttention(Rule):
    """A module of the model computes attention by hand: its ``forward``'s source (read from the
    file and line the agent's per-module record names) holds a ``softmax`` between two matmuls,
    with an optional mask and dropout (minGPT, makemore, ng-video-lecture write it so). The T×T
    score matrix is materialised, masked, soft-maxed and kept for backward;
    ``scaled_dot_product_attention`` does it in one fused call (flash or memory-efficient kernels
    on a GPU). A compiled model is left alone (Inductor rewrites the pattern itself), and so is a
    run whose attention the agent already replaced (its source still reads as hand-written).

    Severity: the attention modules' share of the step × ``sdpa_saving`` (0.5). Thresholds:
    ``min_share`` (0.1) of the step, ``high_share`` (0.4).

    Fix: ``torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)``.
    """

    id, name, bottleneck = "COMP006", "hand-written-attention", Bottleneck.COMPUTE
    cause = "attention_time"
    thresholds = {"min_share": 0.1, "high_share": 0.4, "sdpa_saving": 0.5}
    fix_id = "sdpa_attention"
    fires = (
        Example(
            "GPT block: hand-written causal attention 45% of the step",
            lambda: _run(0.45, PATTERN),
            fix="sdpa_attention",
            severity=0.225,
        ),
    )
    passes = (
        Example(
            "attention already fused (no softmax between matmuls in the source)",
            lambda: _run(0.45, None),
        ),
        Example("hand-written attention a small part of the step", lambda: _run(0.05, PATTERN)),
        Example("compiled model", lambda: _run(0.45, PATTERN, compiled=True)),
    )

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        if f.layers.source != "agent":
            return (
                "no per-module record with source locations (launch the script with Stepwise, "
                "whose agent records each module)"
            )
        return None

    def check(self, f: Facts) -> Finding | None:
        if f.compiled or already_done("sdpa_attention", f):
            return None
        rows = [r for r in f.layers.rows if r.hand_attention and r.share is not None]
        share = attention_share(f)
        if not rows or share < self.t["min_share"]:
            return None
        top = max(rows, key=lambda r: r.share or 0.0)
        where = top.forward_where or top.class_where or "?"
        return self.finding(
            f,
            severity=share * self.t["sdpa_saving"],
            at_stake=share,
            confidence=ramp(share, self.t["min_share"], self.t["high_share"]),
            message=f"{top.name} ({top.module_class}, forward at {where}) computes attention "
            f"by hand ({top.hand_attention}) and takes {pct(share)} of the step: call "
            "torch.nn.functional.scaled_dot_product_attention instead.",
            evidence={
                "attention_module": top.name,
                "attention_where": where,
                "attention_pattern": top.hand_attention,
                "attention_share_of_step": share,
                "attention_instances": top.instances,
            },
        )
