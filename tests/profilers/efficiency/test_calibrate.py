"""A CPU run's efficiency is read against the cores' measured matmul peak, stored with the run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from profilers.efficiency.mfu import efficiency
from profilers.efficiency import calibrate
from profilers.trace.breakdown import breakdown
from profilers.trace.load import load_trace
from tests import trace_factory as tf


def _cpu_trace(path: Path) -> Path:
    events = []
    for s in range(3):  # 10 ms steps, each one 512^3 fp32 matmul filling 8 ms of it
        t0 = s * 10_000
        events += [
            tf.step(s, t0, 10_000),
            tf.x(
                "aten::mm",
                t0 + 100,
                8_000,
                **{"Input Dims": [[512, 512], [512, 512]], "Input type": ["float", "float"]},
            ),
        ]
    return tf.write(path, events)


def test_cpu_mfu_uses_the_stored_calibration(tmp_path: Path) -> None:
    b = breakdown(load_trace(_cpu_trace(tmp_path / "t.json")))
    assert efficiency(b).mfu is None and "calibration" in (efficiency(b).reason or "")
    (tmp_path / calibrate.CALIBRATION_FILE).write_text(
        json.dumps({"matmul_tflops": 0.05, "size": 512, "threads": 2})
    )
    peak = calibrate.read(tmp_path)
    e = efficiency(b, peak)
    achieved = 2 * 512**3 / 10e-3 / 1e12
    assert e.peak_tflops == 0.05 and "host's cores" in (e.peak_basis or "")
    assert e.mfu == pytest.approx(achieved / 0.05, rel=1e-6) and e.mfu <= (e.busy_share or 0)


@pytest.mark.slow
@pytest.mark.timed
def test_the_probe_measures_a_positive_peak(tmp_path: Path) -> None:
    found = calibrate.record(tmp_path)
    if found is None:
        pytest.skip("this interpreter has no torch to measure with")
    assert found["matmul_tflops"] > 0 and calibrate.read(tmp_path) == found["matmul_tflops"]
    assert found["bf16_vs_fp32"] > 0 and calibrate.read_bf16(tmp_path)[0] is (
        found["bf16_decision"] == "faster"
    )


def test_bf16_speed_is_read_from_the_measurement_first_then_the_flags(tmp_path: Path) -> None:
    f = tmp_path / calibrate.CALIBRATION_FILE
    assert calibrate.read_bf16(tmp_path) == (None, "")
    f.write_text(
        json.dumps(
            {"matmul_tflops": 0.1, "bf16_vs_fp32": 0.06, "bf16_size": 512, "cpu_bf16_flags": "none"}
        )
    )
    fast, why = calibrate.read_bf16(tmp_path)
    assert fast is False and "0.06× fp32" in why and "neither avx512_bf16 nor amx_bf16" in why
    f.write_text(
        json.dumps({"matmul_tflops": 0.1, "bf16_vs_fp32": 2.5, "cpu_bf16_flags": "amx_bf16"})
    )
    assert calibrate.read_bf16(tmp_path)[0] is True
    f.write_text(
        json.dumps({"matmul_tflops": 0.1, "cpu_bf16_flags": "avx512_bf16"})
    )  # an older calibration
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


def _noisy_samples(
    true_ratio: float, seed: int, rounds: int = calibrate.ROUNDS
) -> tuple[list[float], list[float]]:
    """Interleaved samples as a machine with a bursty CPU hog gives them: with probability 0.4 a pair falls in a
    burst that slows it 1.5–4x (both samples, 60 ms apart, see the same burst; at a burst's edge, one in four of
    those, only one of them does); every sample also wanders ±3%."""
    rng = np.random.default_rng(seed)
    fp32, bf16 = [], []
    for _ in range(rounds):
        burst = rng.uniform(1.5, 4.0) if rng.random() < 0.4 else 1.0
        edge = burst > 1.0 and rng.random() < 0.25
        hit_fp32 = not edge or rng.random() < 0.5
        fp32.append((1 + 0.03 * rng.standard_normal()) / (burst if hit_fp32 else 1.0))
        bf16.append(
            true_ratio
            * (1 + 0.03 * rng.standard_normal())
            / (burst if (not edge or not hit_fp32) else 1.0)
        )
    return fp32, bf16


@pytest.mark.parametrize(
    "true_ratio, decision", [(2.0, "faster"), (0.06, "slower"), (1.02, "unclear")]
)
def test_the_bf16_decision_is_the_same_across_five_calibrations_under_a_bursty_load(
    true_ratio, decision
) -> None:
    """Within 45 minutes one CPU read bf16 at 0.62x, 2.00x, 7.56x, 3.22x and 2.33x of fp32 (one sample of
    each): the advice flipped. Nine interleaved pairs, read by the median of their ratios, give one decision."""
    seen = [calibrate.summarise(*_noisy_samples(true_ratio, seed)) for seed in range(5)]
    assert [s["bf16_decision"] for s in seen] == [decision] * 5
    for s in seen:
        assert (
            s["bf16_samples"] == calibrate.ROUNDS
            and s["bf16_pair_spread"][0] <= s["bf16_pair_spread"][1]
        )
    if decision != "unclear":
        assert all(s["bf16_vs_fp32"] == pytest.approx(true_ratio, rel=0.1) for s in seen)


def test_an_unclear_calibration_does_not_propose_bf16_and_says_why(tmp_path: Path) -> None:
    found = {
        "matmul_tflops": 0.1,
        "cpu_bf16_flags": "avx512_bf16",
        "bf16_size": 512,
        **calibrate.summarise([1.0, 1.01, 0.99, 1.0], [1.05, 1.04, 1.06, 1.03]),
    }
    (tmp_path / calibrate.CALIBRATION_FILE).write_text(json.dumps(found))
    fast, why = calibrate.read_bf16(tmp_path)
    assert fast is False and "too close to fp32 to be a fix" in why and "pairs 1.0" in why


def test_a_calibration_is_cached_per_machine_and_measured_again_when_stale_or_contended(
    tmp_path, monkeypatch
):
    import time

    monkeypatch.setenv("STEPWISE_CALIBRATION_DIR", str(tmp_path / "cache"))
    probes: list[int] = []
    contended = {"value": True}

    def fake_probe(python: str = "", timeout_s: float = 0.0) -> dict:
        probes.append(1)
        return {
            "matmul_tflops": 0.2,
            "measured_unix": time.time(),
            "contended": contended["value"],
            **{
                k: v
                for k, v in calibrate.summarise([1.0] * 3, [2.0] * 3).items()
                if k != "contended"
            },
        }

    monkeypatch.setattr(calibrate, "probe", fake_probe)
    measure = (
        calibrate.measure.__wrapped__
    )  # the per-process memo aside: what a new process would do
    first = measure()
    assert len(probes) == 1 and first is not None and first["bf16_decision"] == "faster"
    measure()
    assert len(probes) == 2  # taken on a busy machine: not trusted again
    contended["value"] = False
    measure()
    again = measure()
    assert (
        len(probes) == 3 and again is not None and again.get("cached") is True
    )  # a clean one is reused
    [path] = (tmp_path / "cache").glob("*.json")
    stale = {
        **json.loads(path.read_text()),
        "measured_unix": time.time() - calibrate.STALE_AFTER_S - 1,
    }
    path.write_text(json.dumps(stale))
    measure()
    assert len(probes) == 4  # a week old: measured again
