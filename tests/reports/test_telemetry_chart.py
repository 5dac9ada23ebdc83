"""Telemetry of a GPU run (each GPU's lines and the host's, same times) downsamples and charts every series."""

from __future__ import annotations

import pandas as pd

from profilers.store.files import steps_frame, telemetry_frame
from reports.charts.over_time import telemetry as telemetry_chart
from profilers.frames.telemetry import downsample_telemetry

MS = 1_000_000
T0 = 1_700_000_000 * 10**9


def _gpu_run_rows(n: int) -> list[dict]:
    rows = []
    for j in range(n):
        t = T0 + j * 100 * MS
        rows += [
            {
                "t_unix_ns": t,
                "source": "nvml",
                "gpu": g,
                "gpu_util_pct": 50.0 + g,
                "mem_used_mb": 1000.0 * (g + 1),
                "mem_total_mb": 16_000.0,
            }
            for g in (0, 1)
        ]
        rows.append(
            {
                "t_unix_ns": t,
                "source": "host",
                "cpu_pct": 150.0,
                "system_cpu_pct": 80.0,
                "cpu_count": 2,
                "rss_mb": 700.0,
            }
        )
    return rows


def test_host_rows_survive_downsampling_beside_each_gpu() -> None:
    out = downsample_telemetry(telemetry_frame(_gpu_run_rows(3000)), max_points=100)
    host = out[out["gpu"].isna()]
    assert set(out["gpu"].dropna().astype(int)) == {0, 1}
    assert len(host) == 100 and host["cpu_pct"].eq(150.0).all() and host["source"].eq("host").all()
    assert out.loc[out["gpu"] == 1, "mem_used_mb"].eq(2000.0).all()


def test_chart_draws_each_gpu_and_the_host_and_no_empty_series() -> None:
    tel = downsample_telemetry(telemetry_frame(_gpu_run_rows(50)))
    steps = steps_frame(
        [
            {
                "rank": 0,
                "step": i,
                "wall_ms": 100.0,
                "loss": 1.0,
                "samples": 8,
                "profiled": False,
                "t_unix_ns": T0 + i * 100 * MS,
            }
            for i in range(5)
        ]
    )
    fig = telemetry_chart(tel, steps, "nvml")
    names = sorted(trace.name for trace in fig.data)
    assert names == [
        "GPU memory used gpu0",
        "GPU memory used gpu1",
        "GPU utilisation gpu0",
        "GPU utilisation gpu1",
        "run's CPU (100% = one core) host",
        "run's host memory (RSS) host",
    ]
    assert all(pd.Series(trace.y).notna().any() for trace in fig.data)


def test_host_only_telemetry_keeps_its_plain_names() -> None:
    rows = [r for r in _gpu_run_rows(20) if r["source"] == "host"]
    fig = telemetry_chart(downsample_telemetry(telemetry_frame(rows)), steps_frame([]), "host")
    assert sorted(trace.name for trace in fig.data) == [
        "run's CPU (100% = one core)",
        "run's host memory (RSS)",
    ]
