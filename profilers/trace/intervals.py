"""Interval algebra on sorted, disjoint integer intervals (half-open ``[start, end)``), in numpy.

An :class:`Intervals` value is the normal form every analysis works with: starts ascending, no overlaps,
no empty pieces. Everything is vectorised so that a trace with millions of events stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Intervals:
    """A set of time on one axis, as disjoint sorted half-open intervals (integer nanoseconds)."""

    starts: np.ndarray
    ends: np.ndarray

    @staticmethod
    def empty() -> "Intervals":
        z = np.zeros(0, dtype=np.int64)
        return Intervals(z, z)

    @staticmethod
    def of(starts: np.ndarray | list[int], ends: np.ndarray | list[int]) -> "Intervals":
        """Normalise arbitrary (possibly overlapping, unsorted) intervals into a disjoint union."""
        return union(np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.starts.size)

    @property
    def total(self) -> int:
        """Total covered length."""
        return int((self.ends - self.starts).sum())

    def __or__(self, other: "Intervals") -> "Intervals":
        return union(np.concatenate([self.starts, other.starts]), np.concatenate([self.ends, other.ends]))

    def __and__(self, other: "Intervals") -> "Intervals":
        return _combine(self, other, keep="both")

    def __sub__(self, other: "Intervals") -> "Intervals":
        return _combine(self, other, keep="left_only")

    def clip(self, lo: int, hi: int) -> "Intervals":
        return self & Intervals(np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64))

    def covered_in(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Covered length inside each window ``[lo[i], hi[i])`` (vectorised over windows)."""
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.asarray(hi, dtype=np.int64)
        return np.maximum(self._measure_upto(hi) - self._measure_upto(lo), 0)

    def _measure_upto(self, x: np.ndarray) -> np.ndarray:
        """Length of the set inside ``(-inf, x)`` for every x."""
        if self.starts.size == 0:
            return np.zeros(x.shape, dtype=np.int64)
        lengths = self.ends - self.starts
        before = np.concatenate([[0], np.cumsum(lengths)])  # before[i]: length of pieces 0..i-1
        idx = np.searchsorted(self.starts, x, side="right") - 1  # last piece starting at or before x
        safe = np.clip(idx, 0, None)
        partial = np.minimum(x, self.ends[safe]) - self.starts[safe]
        return np.where(idx >= 0, before[safe] + partial, 0)


def union(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Disjoint union of arbitrary intervals; empty and inverted pieces are dropped."""
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if starts.size == 0:
        return Intervals.empty()
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    # A piece opens a new group when it starts after everything before it has ended.
    new_group = np.empty(s.size, dtype=bool)
    new_group[0] = True
    new_group[1:] = s[1:] > reach[:-1]
    group_starts = s[new_group]
    last_of_group = np.append(np.flatnonzero(new_group)[1:] - 1, s.size - 1)
    return Intervals(group_starts.astype(np.int64), reach[last_of_group].astype(np.int64))


def _combine(a: Intervals, b: Intervals, keep: str) -> Intervals:
    """Sweep over both sets' boundaries; keep the pieces covered by both, or by ``a`` only."""
    if len(a) == 0 or (keep == "both" and len(b) == 0):
        return Intervals.empty()
    if keep == "left_only" and len(b) == 0:
        return a
    points = np.concatenate([a.starts, a.ends, b.starts, b.ends])
    da = np.concatenate([np.ones(len(a)), -np.ones(len(a)), np.zeros(2 * len(b))]).astype(np.int8)
    db = np.concatenate([np.zeros(2 * len(a)), np.ones(len(b)), -np.ones(len(b))]).astype(np.int8)
    order = np.argsort(points, kind="stable")
    points, da, db = points[order], da[order], db[order]
    # Collapse equal points so that state is read after every change at that point.
    last = np.append(points[1:] != points[:-1], True)
    in_a = np.cumsum(da)[last] > 0
    in_b = np.cumsum(db)[last] > 0
    xs = points[last]
    inside = in_a & in_b if keep == "both" else in_a & ~in_b
    seg_start, seg_end = xs[:-1], xs[1:]
    sel = inside[:-1] & (seg_end > seg_start)
    return union(seg_start[sel], seg_end[sel])
