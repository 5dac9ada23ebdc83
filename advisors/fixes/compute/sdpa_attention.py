"""scaled_dot_product_attention: one fused attention call in place of a hand-written
softmax(q·kᵀ)·v."""

from __future__ import annotations

from advisors.bounds import Reach
from advisors.facts import Facts
from advisors.fit import spec_says
from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection, const
from advisors.verdict import Bottleneck

SNIPPET = """# in the attention module's forward, for att = softmax(q @ k.T * scale, mask) @ v:
y = torch.nn.functional.scaled_dot_product_attention(
    q, k, v, is_causal=True, dropout_p=self.attn_dropout.p if self.training else 0.0)"""


def attention_share(f: Facts) -> float:
    """The step share of the modules whose forward computes attention by hand (the outermost such
    rows: a row's share holds its submodules')."""
    rows = [r for r in f.layers.rows if r.hand_attention and r.share is not None]
    names = {r.name for r in rows}
    return sum(r.share or 0.0 for r in rows if r.parent not in names)


def hand_attention(f: Facts) -> Reach | None:
    """The hand-written attention modules' time — *if the fused call took no time at all*."""
    if not f.has_steps or not any(r.hand_attention for r in f.layers.rows):
        return None
    share = attention_share(f)
    return Reach(
        share, f"the hand-written attention ({100 * share:.1f}% of the step) takes no time"
    )


FIX = FixSpec(
    id="sdpa_attention",
    title="scaled_dot_product_attention",
    bottleneck=Bottleneck.COMPUTE,
    applies_to="any",
    explanation=(
        "One fused attention kernel (flash / memory-efficient on a GPU, a fused loop on "
        "a CPU) instead of materialising the T×T score matrix, its mask and softmax."
    ),
    snippet=SNIPPET,
    docs=(
        "https://pytorch.org/docs/stable/generated/"
        "torch.nn.functional.scaled_dot_product_attention.html"
    ),
    effort="code change",
    settings={"sdpa_attention": True},
    alternatives=("torch_compile", "bf16_autocast"),
    injection=Injection(const(sdpa_attention=True), "sdpa_attention", "attention"),
    done=spec_says(lambda s: s.sdpa_attention),
    bound=hand_attention,
    examples=(FixExample(ON_CPU, knobs={"sdpa_attention": True}),),
)
