"""A to-quality experiment's gradient noise scale in words (the ``noise_scale`` of its JSON, in one line): written
into its record (:mod:`.quality_record`) and the terminal table alike."""

from __future__ import annotations

from typing import Any


def noise_line(ns: dict[str, Any]) -> str:
    """The noise scale, the critical batch, the statistical efficiency and the goodput-best batch, in a line."""
    if ns.get("b_simple") is None:
        return f"noise scale: {ns.get('reason') or 'not measured'}"
    iv = ns.get("interval")
    p = ns.get("plan") or {}
    eff = p.get("statistical_efficiency")
    hi = "∞" if iv and iv[1] is None else f"{iv[1]:.3g}" if iv else ""
    text = (
        f"noise scale B_simple ≈ {ns['b_simple']:.3g}"
        + (f" [{iv[0]:.3g}, {hi}]" if iv else "")
        + f" over {ns['steps']} steps at batch {ns['batch']} (meter overhead {ns['overhead']:.1%}); critical "
        f"batch ≈ {ns['b_simple']:.3g}"
    )
    if eff is not None:
        text += f"; statistical efficiency now {eff:.0%}"
    if p.get("goodput_best_batch") is not None:
        text += f"; goodput-best batch {p['goodput_best_batch']}"
    return text + f" — {ns.get('reason')}"
