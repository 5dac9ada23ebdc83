"""Bounds that mean something: what a fix can gain at most, from the time that fix can touch.

A finding's ``upper_bound_speedup`` is ``1 / (1 − stake)`` (:attr:`advisors.verdict.Finding.stake`): the whole of its time
at stake vanishing. For a
fix that acts on only part of that time, the fix's own module says which part (its ``bound``: a :class:`Reach`,
the share of the step with the assumption that makes it the most the fix can gain), and
:func:`advisors.fixes.fix_bounds` turns it into a :class:`Bound`:

- ``torch_compile``: the unfused elementwise/normalization kernels plus the GPU's launch gaps; on a CPU, the
  operators' time outside matmuls (:mod:`advisors.fixes.compute.torch_compile`);
- ``channels_last``: convolution time (:mod:`advisors.fixes.compute.channels_last`);
- ``cuda_graphs`` (a GPU step): the GPU's launch gaps (:mod:`advisors.fixes.host.cuda_graphs`);
- the data fixes: the unprofiled steps' time drawing batches (:mod:`advisors.fixes.data.drawing`), which replaces
  the finding's share (``replaces``).

Each bound is ``1 / (1 − share)``; a measured gain above it means the bound was wrong for this run (a
mis-attributed time, or a fix that also acted elsewhere) and is flagged as such (:func:`exceeds`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: A measured speed-up above its bound by more than this is flagged (measurement noise stays below).
EXCEED_TOLERANCE = 0.0


@dataclass(frozen=True)
class Reach:
    """The share of step time a fix can touch, and the assumption under which all of it is won back;
    ``replaces``: measured more directly than the finding's share, so it stands even when larger."""

    share: float
    assumption: str
    replaces: bool = False


@dataclass(frozen=True)
class Bound:
    """The most ``fix_id`` can gain: the share of step time it can touch, the speed-up, and the assumption."""

    fix_id: str
    share: float
    speedup: float | None
    assumption: str
    replaces: bool = (
        False  # measured more directly than the finding's share: it stands even when larger
    )

    def to_json(self) -> dict[str, Any]:
        return {
            "fix": self.fix_id,
            "share": round(self.share, 4),
            "speedup": self.speedup,
            "assumption": self.assumption,
        }


def bound_of(fix_id: str, reach: Reach) -> Bound:
    """``fix_id``'s bound from the time it can touch: ``1 / (1 − share)`` (none when it is the whole step)."""
    share = min(max(reach.share, 0.0), 1.0)
    return Bound(
        fix_id,
        share,
        None if share >= 1.0 else round(1.0 / (1.0 - share), 3),
        reach.assumption,
        reach.replaces,
    )


def exceeds(measured: float | None, bound: float | None) -> bool:
    """True when a measured speed-up is above its bound: the bound (its assumption) was wrong for this run."""
    return measured is not None and bound is not None and measured > bound * (1 + EXCEED_TOLERANCE)


def exceeded_text(measured: float, bound: float, why: str | None = None) -> str:
    return f"measured {measured:.4g}x is above its upper bound {bound:.4g}x: " + (
        why
        or "the bound was wrong for this run (time mis-attributed, or the fix also acted elsewhere)"
    )
