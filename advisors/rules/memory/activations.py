"""What a memory finding says about the layers: which modules keep the most activation memory
for backward (from a launched run's per-module record, :mod:`profilers.layers.saved`), in one
clause of its message and in its evidence. Without per-module rows it says nothing."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.verdict import EvidenceValue
from profilers.layers.saved import holders

#: how many layers the evidence lists
SHOWN = 3


def activation_clause(f: Facts) -> str | None:
    """``blocks.* keeps 610 MB of activations for backward, 72% of the model's`` (``None``: no
    module's saved bytes are known)."""
    top = holders(f.layers, 1)
    if not top:
        return None
    h = top[0]
    share = f", {h.share:.0%} of the model's" if h.share is not None else ""
    return f"{h.row.name} keeps {h.mb:.0f} MB of activations for backward{share}"


def activation_evidence(f: Facts) -> dict[str, EvidenceValue]:
    """The layers holding the most activation memory, as evidence entries (``{}``: none known)."""
    top = holders(f.layers, SHOWN)
    if not top:
        return {}
    h = top[0]
    return {
        "activations_top_layer": h.row.name,
        "activations_top_mb": round(h.mb, 1),
        "activations_top_share": None if h.share is None else round(h.share, 3),
        "activations_top_where": h.where,
        "activations_layers": "; ".join(x.describe() for x in top),
    }


def with_clause(head: str, rest: str, f: Facts) -> str:
    """``head`` and ``rest`` of a message with the activation clause between them, in brackets:
    "Peak memory reaches 95% of capacity (blocks.* keeps 610 MB …): shrink …"."""
    clause = activation_clause(f)
    return head + (f" ({clause})" if clause else "") + rest
