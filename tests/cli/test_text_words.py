"""The ``analyze`` text output says each number once, rounded, and a measurement caveat as a caveat (issue 33:
"0.11737611719459895 TFLOP/s", the contention warning printed under "not enough data (none)")."""

from __future__ import annotations

import pytest

from cli.advisors import _print_text
from profilers.trace.breakdown import CATEGORIES

CONTENDED = (
    "other programs kept 1.4 of the host's 2 cores busy during the steps: timings may be slowed"
)


def _result() -> dict:
    return {
        "device_name": "CPU",
        "ranks": [0],
        "steps": 3,
        "step_time_ms": 10.0,
        "bottleneck": "compute",
        "breakdown": {c: {"ms": 0.0, "share": 0.0} for c in CATEGORIES},
        "findings": [],
        "warnings": [],
        "efficiency": {
            "mfu": 0.0050,
            "achieved_tflops": 0.11737611719459895,
            "peak_tflops": 23.4,
            "peak_basis": "this host's cores, measured fp32 matmul peak",
        },
        "not_enough_data": [
            {"bottleneck": "none", "reason": CONTENDED, "whole_class": False},
            {"bottleneck": "communication", "reason": "one rank", "whole_class": True},
        ],
    }


def test_rates_are_rounded_and_a_caveat_is_not_missing_data(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _print_text(_result())
    out = capsys.readouterr().out
    assert "117 GFLOP/s of 23.4 TFLOP/s" in out and "0.117376" not in out
    assert f"caveat: {CONTENDED}" in out and "not enough data (none)" not in out
    assert "not enough data (communication): one rank" in out
