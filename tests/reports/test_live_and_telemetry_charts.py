"""The live step-time chart and the telemetry chart read as words (issue 33): a slow first step does not set
the axis, profiled steps are marked, legends say what a series is (not "cpu_pct", "rss_mb")."""

from __future__ import annotations

import pandas as pd

from reports.charts.over_time import live_progress, telemetry


def _steps() -> pd.DataFrame:
    walls = [1700.0, 52.0, 50.0, 81.0, 80.0, 82.0, 51.0, 50.0]
    return pd.DataFrame(
        {
            "rank": 0,
            "step": range(8),
            "wall_ms": walls,
            "loss": [2.0 - i / 10 for i in range(8)],
            "profiled": [False, False, False, True, True, True, False, False],
        }
    )


def test_a_slow_first_step_stays_above_the_axis_and_profiled_steps_are_marked() -> None:
    fig = live_progress(_steps())
    assert list(fig.layout.yaxis.range) == [0, 82.0 * 1.15]
    assert "step 0: 1,700 ms, above the axis" in fig.layout.title.text
    [profiled] = [t for t in fig.data if t.name.startswith("profiled")]
    assert list(profiled.x) == [3, 4, 5]


def test_an_ordinary_first_step_leaves_the_axis_alone() -> None:
    steps = _steps().assign(wall_ms=[60.0, 52.0, 50.0, 81.0, 80.0, 82.0, 51.0, 50.0])
    fig = live_progress(steps)
    assert fig.layout.yaxis.range is None and fig.layout.title.text.startswith("Progress")


def test_telemetry_legends_are_words() -> None:
    tel = pd.DataFrame(
        {
            "t_s": [0.0, 0.1, 0.2],
            "t_unix_ns": [0, 10**8, 2 * 10**8],
            "source": "host",
            "cpu_pct": [90.0, 95.0, 99.0],
            "rss_mb": [300.0, 301.0, 302.0],
        }
    )
    names = {t.name for t in telemetry(tel, pd.DataFrame()).data}
    assert names == {"run's CPU (100% = one core)", "run's host memory (RSS)"}
