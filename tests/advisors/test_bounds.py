"""Bounds from the time a fix can touch, stated with their assumption; numbers near a threshold with digits."""

from __future__ import annotations

import pytest

from advisors.bounds import exceeds
from advisors.fixes import fix_bounds
from advisors.diagnosis import diagnose, diagnosis_json, upper_bound_for
from advisors.facts import derive
from advisors.stats import beside
from advisors.synthetic import observation


def test_compile_bound_is_pointwise_time_and_launch_gaps_not_the_whole_device() -> None:
    # a saturated GPU (99.7% busy): the whole-device bound would be 1/(1-0.997) = 333x
    obs = observation(
        {"gpu_compute": 0.997},
        kernels={"matmul": 0.8, "elementwise": 0.15, "normalization": 0.047},
        low_precision=1.0,
    )
    f = derive(obs)
    b = fix_bounds(f)["torch_compile"]
    # pointwise kernels 19.7% of the step + the 0.3% the GPU idles
    assert b.share == pytest.approx(0.2, abs=1e-6) and b.speedup == pytest.approx(1.25, abs=1e-3)
    assert "unfused" in b.assumption and "launch gaps" in b.assumption
    d = diagnose(obs)
    assert upper_bound_for(d, "torch_compile") == b.speedup
    doc = diagnosis_json(d)
    compile_findings = [
        g for g in doc["findings"] if g["fix"] and g["fix"]["id"] == "torch_compile"
    ]
    assert compile_findings and all(g["upper_bound_speedup"] <= b.speedup for g in compile_findings)
    assert compile_findings[0]["fix_bound"]["assumption"] == b.assumption


def test_channels_last_bound_is_convolution_time(tmp_path) -> None:
    from advisors.observation import observe
    from tests import trace_factory as tf

    events = [
        tf.step(0, 0, 10_000),
        tf.kernel("implicit_convolve_sgemm", 100, 4_000),
        tf.kernel("volta_sgemm_128x64_nn", 4_200, 5_000),
    ]
    b = fix_bounds(derive(observe(tf.write(tmp_path / "t.json", events))))["channels_last"]
    assert b.share == pytest.approx(0.4) and b.speedup == pytest.approx(1 / 0.6, abs=1e-3)
    assert "convolutions (40.0% of the step)" in b.assumption


def test_measured_above_its_bound_is_flagged_and_digits_show_the_side() -> None:
    assert exceeds(1.51, 1.49) and not exceeds(1.40, 1.49) and not exceeds(None, 1.49)
    assert (
        beside(1.0257, 1.03) == "1.026"
        and beside(1.0297, 1.03) == "1.0297"
        and beside(1.3212, 1.03) == "1.32"
    )
    assert float(beside(1.02999, 1.03)) < 1.03


def test_a_data_fix_is_bounded_by_the_unprofiled_steps_time_drawing_batches() -> None:
    """The profiled window said the loader held 88.8% of the step (bound 8.9x) and a cached dataset measured
    14.2x: the profiler taxes each forward/backward operator, not the decode. The bound now comes from the steady
    steps' own batch-drawing time, timed without the profiler, and replaces the window's."""
    from advisors.synthetic import run_facts
    from profilers.run.run_config import RunConfig

    spec = RunConfig(workload="data_bound", num_workers=2)
    window_only = observation(
        {"dataloader": 0.888, "forward": 0.112}, device="cpu", run=run_facts(spec=spec)
    )
    unprofiled = observation(
        {"dataloader": 0.888, "forward": 0.112},
        device="cpu",
        run=run_facts(spec=spec, data_wait_share=0.95),
    )
    assert "cache_decoded" not in fix_bounds(derive(window_only))
    b = fix_bounds(derive(unprofiled))["cache_decoded"]
    assert (
        b.replaces
        and b.speedup == pytest.approx(20.0, rel=1e-3)
        and "without the profiler" in b.assumption
    )
    d = diagnose(unprofiled)
    assert upper_bound_for(d, "cache_decoded") == pytest.approx(20.0, rel=1e-3)
    doc = diagnosis_json(d)
    data = next(g for g in doc["findings"] if g["fix"] and g["fix"]["id"] == "cache_decoded")
    assert data["upper_bound_speedup"] == pytest.approx(
        20.0, rel=1e-3
    )  # not the window's smaller 8.9x
    assert not exceeds(14.2, data["upper_bound_speedup"]) and exceeds(
        14.2, upper_bound_for(diagnose(window_only), "cache_decoded")
    )
    # one bound for the fix on every surface (issue 41: the Diagnosis said 5.61x, the Apply card 8.96x): the
    # finding's own (the Diagnosis panel and the report read it) is the JSON's and the Apply's
    from advisors.diagnosis import bound_of

    finding = next(f for g in d.findings for f in (g, *g.related) if f.fix_id == "cache_decoded")
    shown = bound_of(d, finding)
    assert shown is not None and shown.speedup == data["upper_bound_speedup"] == upper_bound_for(
        d, "cache_decoded"
    )
    assert finding.upper_bound_speedup is not None and finding.upper_bound_speedup < shown.speedup


def test_a_data_fix_above_its_bound_says_the_rest_of_the_step_got_faster_when_it_did() -> None:
    """Measured on data_bound: 3.41 ms of the step outside batch drawing before, a 2.37 ms step with the cache —
    the compute itself got faster, which no bound read from the baseline can time: the flag says so."""
    from advisors.bounds import exceeded_text
    from advisors.fixes import rest_got_faster

    why = rest_got_faster("cache_decoded", 3.41, 2.37)
    assert (
        why is not None
        and "patched step (2.37 ms) is shorter than the baseline's step without its batch "
        "drawing (3.41 ms)"
        in why
    )
    assert (
        rest_got_faster("cache_decoded", 3.41, 3.6) is None
    )  # the bound's own case: it was simply wrong
    assert rest_got_faster("torch_compile", 3.41, 2.37) is None  # not a data fix
    assert exceeded_text(12.9, 8.9, why).endswith(why)
    assert "the bound was wrong for this run" in exceeded_text(12.9, 8.9)
