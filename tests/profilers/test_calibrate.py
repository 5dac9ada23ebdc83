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
    assert found["bf16_vs_fp32"] > 0 and calibrate.read_bf16(tmp_path)[0] is (found["bf16_vs_fp32"] > 0.9)


def test_bf16_speed_is_read_from_the_measurement_first_then_the_flags(tmp_path: Path) -> None:
    f = tmp_path / calibrate.CALIBRATION_FILE
    assert calibrate.read_bf16(tmp_path) == (None, "")
    f.write_text(json.dumps({"matmul_tflops": 0.1, "bf16_vs_fp32": 0.06, "bf16_size": 512, "cpu_bf16_flags": "none"}))
    fast, why = calibrate.read_bf16(tmp_path)
    assert fast is False and "0.06× fp32" in why and "neither avx512_bf16 nor amx_bf16" in why
    f.write_text(json.dumps({"matmul_tflops": 0.1, "bf16_vs_fp32": 2.5, "cpu_bf16_flags": "amx_bf16"}))
    assert calibrate.read_bf16(tmp_path)[0] is True
    f.write_text(json.dumps({"matmul_tflops": 0.1, "cpu_bf16_flags": "avx512_bf16"}))  # an older calibration
    assert calibrate.read_bf16(tmp_path) == (True, "CPU flags: avx512_bf16")
    f.write_text(json.dumps({"matmul_tflops": 0.1}))
    assert calibrate.read_bf16(tmp_path) == (None, "")


def test_the_cpu_flags_name_the_bf16_ones() -> None:
    from stepwise_agent import hostinfo

    flags = hostinfo.cpu_flags()
    said = hostinfo.cpu_bf16_flags()
    if flags is None:
        assert said is None
    else:
        assert said == (" ".join(f for f in hostinfo.BF16_FLAGS if f in flags) or "none")
