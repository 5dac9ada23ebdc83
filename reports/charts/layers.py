"""Where in the model the step goes: the module tree as an icicle, sized by time or by activation
memory."""

from __future__ import annotations

import plotly.graph_objects as go

from profilers.layers import Layers, LayerRow
from reports.charts import label, style


def _total(r: LayerRow, by: str) -> float:
    if by == "memory":
        return float(r.saved_bytes or 0) / 2**20
    return r.forward_ms + (r.backward_ms or 0.0)


def layers_icicle(layers: Layers, by: str = "time") -> go.Figure:
    """One box per module (repeated blocks as one), nested under its parent and as wide as its
    time (ms per step, forward plus backward) or its activation memory kept for backward (MiB per
    step). A parent's own part is what its submodules do not account for (its values are
    inclusive)."""
    rows = layers.rows
    total = {r.name: _total(r, by) for r in rows}
    children: dict[str, float] = {}
    for r in rows:
        if r.parent is not None and r.parent in total:
            children[r.parent] = children.get(r.parent, 0.0) + total[r.name]
    own = [max(total[r.name] - children.get(r.name, 0.0), 0.0) for r in rows]
    unit = "MiB" if by == "memory" else "ms"
    hover = [
        f"{label(r.name, 200)} ({label(r.module_class)} ×{r.instances})"
        f"<br>{total[r.name]:.3f} {unit} per step"
        + (f", {r.share:.0%} of the step" if r.share is not None and by == "time" else "")
        + (
            f"<br>{label(r.class_where or r.forward_where)}"
            if (r.class_where or r.forward_where)
            else ""
        )
        for r in rows
    ]
    fig = go.Figure(
        go.Icicle(
            ids=[r.name for r in rows],
            labels=[label(r.name.rsplit(".", 1)[-1]) for r in rows],
            parents=[r.parent if r.parent in total else "" for r in rows],
            values=own,
            branchvalues="remainder",
            hovertext=hover,
            hoverinfo="text",
            root={"color": "lightgrey"},
        )
    )
    what = (
        "activation memory kept for backward (MiB per step)"
        if by == "memory"
        else "time per step (ms, forward + backward)"
    )
    return style(fig, f"Modules by {what}", height=480)
