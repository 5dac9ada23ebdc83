"""Which modules keep the activations backward needs: a run's per-module rows
(:mod:`profilers.layers.rows`) ranked by ``saved_bytes``, the activation bytes each keeps for
backward per step (its submodules' included).

A row's bytes hold its submodules', so the whole model's row holds everything and a ``ModuleList``
holds what its blocks hold: :func:`holders` leaves the model's own rows out and never names a row
inside (or around) one it already named, so ``blocks.*`` is said once, not again as ``blocks`` or
``blocks.*.mlp``. Between a container and its repeated blocks, which keep the same bytes, the
repeated blocks are named: they are what a checkpoint wraps.
"""

from __future__ import annotations

from dataclasses import dataclass

from profilers.layers.rows import LayerRow, Layers

MB = 1024**2


@dataclass(frozen=True)
class Holder:
    """One module (or group of repeated modules) and its share of the model's saved bytes."""

    row: LayerRow
    share: float | None  # of the model's saved bytes (None: the model's total is not known)

    @property
    def mb(self) -> float:
        return (self.row.saved_bytes or 0) / MB

    @property
    def where(self) -> str | None:
        return self.row.class_where or self.row.forward_where

    def describe(self) -> str:
        """``blocks.* 610 MB (72%, model.py:40)``."""
        said = [f"{self.share:.0%}"] if self.share is not None else []
        said += [self.where] if self.where else []
        return f"{self.row.name} {self.mb:.0f} MB" + (f" ({', '.join(said)})" if said else "")


def _nested(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def saved_total(layers: Layers) -> int | None:
    """The bytes the whole model keeps for backward per step (its root rows'), ``None``: unknown."""
    roots = [r.saved_bytes for r in layers.rows if r.parent is None and r.saved_bytes is not None]
    return sum(roots) if roots else None


def holders(layers: Layers, n: int = 3, repeated: bool = False) -> tuple[Holder, ...]:
    """The ``n`` rows keeping the most activation bytes, largest first, none nested in another
    (see the module docs); ``repeated``: groups of repeated modules only (``blocks.*``)."""
    rows = [
        r
        for r in layers.rows
        if r.saved_bytes and r.parent is not None and (not repeated or r.instances > 1)
    ]
    rows.sort(key=lambda r: (-(r.saved_bytes or 0), -r.instances, r.name.count("."), r.name))
    total = saved_total(layers)
    out: list[Holder] = []
    for r in rows:
        if len(out) == n:
            break
        if not any(_nested(r.name, h.row.name) for h in out):
            share = (r.saved_bytes or 0) / total if total else None
            out.append(Holder(r, share))
    return tuple(out)
