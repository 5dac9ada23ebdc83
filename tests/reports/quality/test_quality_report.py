"""The time-to-quality figure, Markdown and page, from the JSON of a recorded (fake-clock) experiment."""

from __future__ import annotations

from typing import Any

from advisors.experiments.results.quality_record import quality_record
from advisors.experiments.to_quality import to_quality
from advisors.experiments.to_quality_report import quality_json
from advisors.quality import candidates as cands
from advisors.quality.target import Budget
from reports.quality import html_page, markdown, round_figure, tradeoff_figure
from tests.advisors.quality.recorded import resolved
from tests.advisors.quality.test_decisions import BASE, fake_runner, patch_workload


def recorded(plateau_at: float | None = None) -> dict[str, Any]:
    ladder = to_quality(
        BASE,
        [resolved(0), cands.early_stopping()],
        fake_runner(plateau_at),
        Budget(steps=500),
        seeds=3,
        apply=patch_workload,
    )
    return quality_json(ladder)


def test_figure_draws_both_arms_against_wall_clock_the_target_and_each_time_to_target() -> None:
    out = recorded()
    fig = round_figure(out, 1)
    names = {t.name for t in fig.data}
    assert (
        names == {"baseline", "batch × 4, linear lr scaling"} and len(fig.data) == 6
    )  # 3 seeds per arm
    assert fig.layout.xaxis.title.text == "wall-clock time (s)"
    shapes = fig.layout.shapes
    horizontal = [s for s in shapes if s.y0 == s.y1 and s.y0 == out["target"]["value"]]
    vertical = sorted(s.x0 for s in shapes if s.x0 == s.x1)
    assert len(horizontal) == 1
    tt = out["rounds"][0]["time_to_target"]
    assert vertical == sorted([tt["before_s"], tt["after_s"]])


def test_early_stopping_figure_marks_each_seeds_stop_and_markdown_escapes() -> None:
    out = recorded(plateau_at=1.0)
    out["rounds"][0]["title"] = "<b>x|y</b>"
    assert out["rounds"][1]["outcome"] == "trade-off" and not out["rounds"][1]["kept"]
    fig = round_figure(out, 2)
    [stops] = [t for t in fig.data if t.name == "early stop"]
    assert list(stops.x) == [p["stop_s"] for p in out["rounds"][1]["early_stopping"]["per_seed"]]
    md = markdown(quality_record(out))
    assert "&lt;b&gt;x\\|y&lt;/b&gt;" in md and "<b>" not in md
    assert (
        "| trade-off |" in md and "trade-off: stopping at step" in md
    )  # the one line, in the report


def test_the_tradeoff_figure_draws_each_seed_and_marks_the_patience_point() -> None:
    out = recorded(plateau_at=1.0)
    es = out["rounds"][1]["early_stopping"]
    fig = tradeoff_figure(out["rounds"][1])
    assert fig is not None and tradeoff_figure(out["rounds"][0]) is None
    seeds = [t for t in fig.data if t.name.startswith("seed ")]
    assert len(seeds) == 3 and list(seeds[0].y) == [p["given_up"] for p in es["tradeoff"][0]]
    [patience] = [t for t in fig.data if t.name == "patience rule"]
    assert list(patience.x) == [p["saved_share"] * 100 for p in es["per_seed"]]
    assert fig.layout.xaxis.title.text == "time saved (% of the run)"
    assert html_page(quality_record(out), out).count(b"time saved (% of the run)") == 1
    page = html_page(quality_record(out), out)
    assert page.startswith(b"<!doctype html>") and b"plotly" in page.lower()
