"""Interval algebra: hand-checked cases plus a property test against a brute-force set of integers."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from profilers.trace.intervals import Intervals


def iv(*pairs: tuple[int, int]) -> Intervals:
    return Intervals.of([p[0] for p in pairs], [p[1] for p in pairs])


def pairs(x: Intervals) -> list[tuple[int, int]]:
    return list(zip(x.starts.tolist(), x.ends.tolist()))


def test_union_merges_overlaps_and_touching_pieces():
    assert pairs(iv((5, 7), (0, 2), (1, 3), (3, 4), (10, 10))) == [(0, 4), (5, 7)]


def test_union_drops_inverted_and_empty():
    assert pairs(iv((5, 1), (2, 2))) == []
    assert iv().total == 0


def test_intersection_and_difference():
    a, b = iv((0, 10), (20, 30)), iv((5, 25))
    assert pairs(a & b) == [(5, 10), (20, 25)]
    assert pairs(a - b) == [(0, 5), (25, 30)]
    assert pairs(b - a) == [(10, 20)]
    assert (a - iv()).total == 20 and (a & iv()).total == 0


def test_covered_in_windows():
    a = iv((0, 10), (20, 30))
    got = a.covered_in(np.array([0, 5, 10, 25, 40]), np.array([30, 22, 20, 100, 50]))
    assert got.tolist() == [20, 7, 0, 5, 0]


def test_clip():
    assert pairs(iv((0, 10), (20, 30)).clip(5, 25)) == [(5, 10), (20, 25)]


def _as_set(x: Intervals) -> set[int]:
    return {t for s, e in pairs(x) for t in range(s, e)}


raw = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(raw, raw, st.integers(0, 60), st.integers(0, 60))
def test_algebra_matches_brute_force(a_raw, b_raw, lo, hi):
    a = Intervals.of([p[0] for p in a_raw], [p[1] for p in a_raw])
    b = Intervals.of([p[0] for p in b_raw], [p[1] for p in b_raw])
    sa = {t for s, e in a_raw for t in range(s, e)}
    sb = {t for s, e in b_raw for t in range(s, e)}
    assert _as_set(a) == sa and a.total == len(sa)
    assert _as_set(a | b) == sa | sb
    assert _as_set(a & b) == sa & sb
    assert _as_set(a - b) == sa - sb
    # normal form: sorted, disjoint, non-touching
    assert all(e1 < s2 for (_, e1), (s2, _) in zip(pairs(a), pairs(a)[1:]))
    assert a.covered_in(np.array([lo]), np.array([hi]))[0] == len({t for t in sa if lo <= t < hi})


def test_difference_and_intersection_reach_the_ends_of_the_axis():
    """``a - b`` is ``a`` and the gaps of ``b``, which run to the int64 axis' ends: nothing overflows there."""
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    a, b = iv((lo, 5)), iv((0, hi))
    assert pairs(a - b) == [(lo, 0)] and pairs(a & b) == [(0, 5)] and pairs(b - a) == [(5, hi)]
    assert pairs(iv((lo, hi)) - iv((lo, 3), (7, hi))) == [(3, 7)]
    assert pairs(iv((0, 10)) & iv((0, 5), (6, 10))) == [(0, 5), (6, 10)]
    assert pairs(iv((0, 5), (6, 10)) & iv((0, 10))) == [(0, 5), (6, 10)]
