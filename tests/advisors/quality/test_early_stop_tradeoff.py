"""Early stopping as a trade-off (issue 43): each run's curve of time saved against metric given up, the patience
point marked; with a target, the earliest point that still reaches it; without one, a line and the user's call."""

from __future__ import annotations

import pytest

from advisors.quality.curve import Curve
from advisors.quality.early_stop import measure, tradeoff


def floor(n: int = 100, noise_floor: float = 0.5, seed_shift: float = 0.0) -> Curve:
    """A loss flooring slowly towards ``noise_floor`` (label noise): most of the run gives up little."""
    vals = tuple(noise_floor + seed_shift + 1.5 * 0.9**i + 0.02 * (1 - i / n) for i in range(n))
    return Curve(
        tuple(float(i + 1) for i in range(n)), vals, tuple(range(1, n + 1)), float(n), smoothed=True
    )


def test_the_tradeoff_curve_saves_less_the_later_it_stops_and_gives_up_less() -> None:
    pts = tradeoff(floor(), "min")
    assert 2 <= len(pts) <= 40 and pts[0].step == 1 and pts[-1].step == 100
    assert [p.saved_share for p in pts] == sorted((p.saved_share for p in pts), reverse=True)
    assert pts[-1].saved_share == 0.0 and pts[-1].given_up == pytest.approx(0.0)
    assert pts[0].given_up == pytest.approx(pts[0].value - min(floor().values))


def test_without_a_target_the_verdict_is_one_line_and_left_to_the_user() -> None:
    curves = [floor(seed_shift=0.001 * s) for s in range(3)]
    es = measure(curves, "min")
    assert es.outcome == "trade-off" and not es.kept and es.target is None
    step = sorted(p.stop_step or 0 for p in es.points)[1]
    at_stop = sorted(p.value_at_stop or 0 for p in es.points)[1]
    best = sorted(p.best_at_end for p in es.points)[1]
    assert es.reason.startswith(f"trade-off: stopping at step {step} (patience")
    assert (
        f"saves {es.saved_share:.0%} of the time and ends at {at_stop:.4g} instead of {best:.4g}"
        in es.reason
    )
    out = es.to_json()
    assert out["outcome"] == "trade-off" and len(out["tradeoff"]) == 3
    assert all(
        p["stop_step"] == q.stop_step for p, q in zip(out["per_seed"], es.points)
    )  # the patience point


def test_with_a_target_the_verdict_is_the_earliest_point_that_still_reaches_it() -> None:
    curves = [floor(seed_shift=0.001 * s) for s in range(3)]
    es = measure(curves, "min", target=0.7)
    assert es.outcome == "kept" and es.kept
    for c, p in zip(curves, es.at_target):
        assert p is not None and p.value_at_stop is not None and p.value_at_stop <= 0.7
        i = c.steps.index(p.stop_step)
        assert c.values[i - 1] > 0.7  # the earliest point at the target
    assert "stopping at the first point that reaches the target 0.7" in es.reason
    assert es.saved_share == pytest.approx(sorted(p.saved_share for p in es.at_target if p)[1])


def test_a_target_the_run_never_reaches_rejects_stopping_earlier() -> None:
    es = measure([floor(), floor(seed_shift=0.001)], "min", target=0.1)
    assert (
        es.outcome == "rejected"
        and not es.kept
        and "2 of 2 run(s) never reach the target 0.1" in es.reason
    )


def test_seeds_that_are_one_run_are_said_so_with_no_spread() -> None:
    es = measure([floor(), floor(), floor()], "min", one_run=True)
    assert es.one_run and es.noise is None and "the 3 seeds are one run" in es.reason
