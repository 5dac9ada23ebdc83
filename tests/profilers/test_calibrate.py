"""A CPU run's efficiency is read against the cores' measured matmul peak, stored with the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profilers.efficiency.mfu import efficiency
from profilers.run import calibrate
from profilers.trace.breakdown import breakdown
from profilers.trace.load import load_trace
from tests import trace_factory as tf


def _cpu_trace(path: Path) -> Path:
    events = []
    for s in range(3):  # 10 ms steps, each one 512^3 fp32 matmul filling 8 ms of it
        t0 = s * 10_000
        events += [tf.step(s, t0, 10_000), tf.x("aten::mm", t0 + 100, 8_000,
                                                **{"Input Dims": [[512, 512], [512, 512]],
                                                   "Input type": ["float", "float"]})]
    return tf.write(path, events)


def test_cpu_mfu_uses_the_stored_calibration(tmp_path: Path) -> None:
    b = breakdown(load_trace(_cpu_trace(tmp_path / "t.json")))
    assert efficiency(b).mfu is None and "calibration" in (efficiency(b).reason or "")
    (tmp_path / calibrate.CALIBRATION_FILE).write_text(json.dumps({"matmul_tflops": 0.05, "size": 512, "threads": 2}))
    peak = calibrate.read(tmp_path)
    e = efficiency(b, peak)
    achieved = 2 * 512**3 / 10e-3 / 1e12
    assert e.peak_tflops == 0.05 and "host's cores" in (e.peak_basis or "")
    assert e.mfu == pytest.approx(achieved / 0.05, rel=1e-6) and e.mfu <= (e.busy_share or 0)


@pytest.mark.slow
def test_the_probe_measures_a_positive_peak(tmp_path: Path) -> None:
    found = calibrate.record(tmp_path)
    if found is None:
        pytest.skip("this interpreter has no torch to measure with")
    assert found["matmul_tflops"] > 0 and calibrate.read(tmp_path) == found["matmul_tflops"]
