"""Issue 21 items 1-3 and device-aware advice, from small hand-made Kineto traces (tests/trace_factory.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisors.diagnosis import diagnose
from advisors.observation import observe
from advisors.verdict import Bottleneck
from profilers.trace.breakdown import breakdown
from profilers.efficiency.mfu import efficiency
from profilers.trace.load import load_trace
from tests import trace_factory as tf

H100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85 * 2**30}]
V100 = [{"id": 0, "name": "Tesla V100-SXM2-32GB", "totalGlobalMem": 32 * 2**30}]


def _mm(ts: float, dur: float, m: int, k: int, n: int, dtype: str) -> dict:
    return tf.x(
        "aten::mm", ts, dur, **{"Input Dims": [[m, k], [k, n]], "Input type": [dtype, dtype]}
    )


def _busy_trace(
    path: Path, device: list[dict], m: int, dtype: str, kernel: str, steps: int = 3
) -> Path:
    """Steps of 10 ms, each one matmul op whose kernel fills 9.9 ms of it."""
    events: list[dict] = []
    for s in range(steps):
        t0 = s * 10_000
        events += [
            tf.step(s, t0, 10_000),
            _mm(t0 + 5, 9_900, m, 4096, 4096, dtype),
            tf.kernel(kernel, t0 + 50, 9_900),
        ]
    return tf.write(path, events, deviceProperties=device)


def test_mfu_against_a_named_gpus_peak(tmp_path: Path) -> None:
    # 2·8192·4096·4096 FLOPs per 10 ms step = 27.49 TFLOP/s; H100 SXM bf16 dense peak 989.4 TFLOP/s
    b = breakdown(
        load_trace(_busy_trace(tmp_path / "t.json", H100, 8192, "c10::BFloat16", "sm90_gemm_bf16"))
    )
    e = efficiency(b)
    flops = 2 * 8192 * 4096 * 4096
    assert e.achieved_tflops == pytest.approx(flops / 10e-3 / 1e12, rel=1e-6)
    assert e.peak_tflops == 989.4 and e.dtype == "bf16" and "H100 SXM" in (e.peak_basis or "")
    assert e.mfu == pytest.approx(flops / 10e-3 / 1e12 / 989.4, rel=1e-6)
    assert not e.clamped and e.flops_source.startswith("record_shapes")


def test_mfu_never_exceeds_the_busy_share_and_unknowns_say_why(tmp_path: Path) -> None:
    events = [
        tf.step(0, 0, 10_000),
        _mm(5, 100, 65536, 65536, 65536, "c10::BFloat16"),
        tf.kernel("sm90_gemm_bf16", 50, 1_000),
    ]  # an impossible count for a 1 ms kernel
    e = efficiency(
        breakdown(load_trace(tf.write(tmp_path / "c.json", events, deviceProperties=H100)))
    )
    assert e.clamped and e.mfu == pytest.approx(0.1, abs=1e-3)
    plain = [tf.step(0, 0, 1000), tf.x("aten::mm", 5, 100), tf.kernel("sgemm", 10, 500)]
    e = efficiency(
        breakdown(load_trace(tf.write(tmp_path / "n.json", plain, deviceProperties=H100)))
    )
    assert e.mfu is None and "record_shapes" in (e.reason or "")
    unknown = [{"id": 0, "name": "Mystery Accelerator 9000", "totalGlobalMem": 1}]
    e = efficiency(
        breakdown(load_trace(_busy_trace(tmp_path / "u.json", unknown, 64, "float", "sgemm")))
    )
    assert e.mfu is None and "not in the peak table" in (e.reason or "") and e.achieved_tflops


def test_analyze_json_carries_efficiency(tmp_path: Path) -> None:
    from cli.advisors import analyze

    out = analyze(
        str(_busy_trace(tmp_path / "t.json", H100, 8192, "c10::BFloat16", "sm90_gemm_bf16"))
    )
    eff = out["efficiency"]
    assert set(eff) >= {"achieved_tflops", "peak_tflops", "peak_basis", "mfu", "flops_source"}
    assert 0 < eff["mfu"] < 0.05 and eff["peak_basis"].startswith("H100 SXM, bf16")


def test_busy_but_low_mfu_is_not_no_cheap_fix(tmp_path: Path) -> None:
    # GPU busy 99%, bf16 GEMMs, compiled (Triton kernels) — but tiny matmuls: MFU far under 20%
    events: list[dict] = []
    for s in range(3):
        t0 = s * 10_000
        events += [
            tf.step(s, t0, 10_000),
            _mm(t0 + 5, 9_900, 64, 512, 512, "c10::BFloat16"),
            tf.kernel("sm90_gemm_bf16", t0 + 50, 6_000),
            tf.kernel("triton_poi_fused_add_0", t0 + 6_050, 3_900),
        ]
    d = diagnose(observe(tf.write(tmp_path / "t.json", events, deviceProperties=H100)))
    assert d.bottleneck is Bottleneck.COMPUTE and d.binding is not None
    assert "no cheap fix" not in d.binding.message and "MFU" in d.binding.message
    assert d.binding.fix_id == "larger_batch" and d.binding.evidence["mfu"] < 0.2


def test_gpu_idle_in_python_is_host(tmp_path: Path) -> None:
    # one 100 ms step: kernels 42 ms, then 58 ms of host Python (no DataLoader, no collective): time in `other`
    events = [
        tf.step(0, 0, 100_000),
        tf.x("aten::linear", 10, 200),
        tf.kernel("sgemm_long", 300, 42_000),
    ]
    d = diagnose(observe(tf.write(tmp_path / "t.json", events, deviceProperties=H100)))
    assert d.bottleneck is Bottleneck.HOST, [(f.rule, f.severity) for f in d.findings]
    assert d.binding is not None and d.binding.severity == pytest.approx(0.58, abs=0.01)


@pytest.mark.parametrize(("device", "fix"), [(V100, "fp16_autocast"), (H100, "bf16_autocast")])
def test_precision_advice_respects_the_device(tmp_path: Path, device: list[dict], fix: str) -> None:
    # fp32 GEMMs (non-Tensor-Core sgemm kernels) fill the GPU
    events: list[dict] = []
    for s in range(3):
        t0 = s * 10_000
        events += [
            tf.step(s, t0, 10_000),
            _mm(t0 + 5, 9_900, 4096, 4096, 4096, "float"),
            tf.kernel("volta_sgemm_128x64_nn", t0 + 50, 9_900),
        ]
    d = diagnose(observe(tf.write(tmp_path / "t.json", events, deviceProperties=device)))
    fixes = {f.fix_id for g in d.findings for f in (g, *g.related)}
    assert fix in fixes and ({"bf16_autocast", "fp16_autocast"} - {fix}).isdisjoint(fixes)
    if fix == "fp16_autocast":
        assert d.binding is not None and "GradScaler" in d.binding.message


def test_close_causes_are_named_together_cheap_fix_first() -> None:
    from advisors.ranking import rank, ranking_json
    from advisors.synthetic import observation

    # a loader in the training process at 25% of the step, launch gaps at 32% (5 µs of GPU idle per launch)
    obs = observation(
        {"gpu_compute": 0.43, "dataloader": 0.25, "forward": 0.32},
        kernels_per_step=600,
        step_ms=10,
        median_kernel_us=5,
        ops={"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__": 0.25},
    )
    d = diagnose(obs)
    assert d.bottleneck is Bottleneck.HOST  # the verdict: the most time at stake
    r = rank(d)
    assert r.close_second is not None and r.close_second.bottleneck is Bottleneck.DATA
    assert r.order[0].fix_id == "dataloader_workers" and r.order[1].fix_id == "cuda_graphs"
    assert r.why_first and "cheaper" in r.why_first and "keyword" in r.why_first
    doc = ranking_json(r)
    assert (
        doc["fix_order"][0]["effort"] == "keyword" and doc["close_second"]["bottleneck"] == "data"
    )


def test_a_far_second_is_not_close() -> None:
    from advisors.ranking import rank
    from advisors.synthetic import observation

    d = diagnose(
        observation(
            {"gpu_compute": 0.3, "dataloader": 0.08, "forward": 0.62},
            kernels_per_step=60,
            median_kernel_us=5,
        )
    )
    assert d.bottleneck is Bottleneck.HOST and rank(d).close_second is None


def test_tf32_is_never_proposed_before_ampere(tmp_path: Path) -> None:
    from advisors.experiments.optimize import proposed

    events: list[dict] = []
    for s in range(3):
        t0 = s * 10_000
        events += [
            tf.step(s, t0, 10_000),
            _mm(t0 + 5, 9_900, 4096, 4096, 4096, "float"),
            tf.kernel("volta_sgemm_128x64_nn", t0 + 50, 9_900),
        ]
    on_v100 = diagnose(observe(tf.write(tmp_path / "v.json", events, deviceProperties=V100)))
    on_h100 = diagnose(observe(tf.write(tmp_path / "h.json", events, deviceProperties=H100)))
    assert "tf32" not in proposed(on_v100) and "fp16_autocast" in proposed(on_v100)
    assert "tf32" in proposed(on_h100) and proposed(on_h100)[0] == "bf16_autocast"


# -- bf16 on a CPU: advised only where its matmuls are faster than fp32 ------------------------------------------
def _cpu_fp32_matmul_run(bf16_fast: bool | None, basis: str = "") -> "object":
    from advisors.synthetic import observation, run_facts

    return observation(
        {"forward": 0.4, "backward": 0.5},
        device="cpu",
        cpu_matmul={"fp32": 0.75},
        run=run_facts(cpu_bf16_fast=bf16_fast, cpu_bf16_basis=basis),
    )


def test_a_cpu_whose_bf16_matmuls_are_slow_is_not_advised_bf16() -> None:
    """This machine's AVX2 CPU ran 1024² bf16 matmuls ~50x slower than fp32: its calibration says so, and neither
    COMP005 nor COMP002 nor the ladder's candidates propose bf16 (or fp16) autocast there."""
    from advisors.experiments.optimize import proposed

    slow = diagnose(
        _cpu_fp32_matmul_run(
            False, "bf16 matmuls (512×512) ran at 0.06× fp32's rate on this machine"
        )
    )
    fixes = [g.fix_id for g in slow.findings for g in (g, *g.related)]
    assert "bf16_autocast" not in fixes and "fp16_autocast" not in fixes
    assert "COMP005" not in [r.rule for g in slow.findings for r in (g, *g.related)]
    assert slow.evidence.get("cpu_bf16_fast") is False
    assert not {"bf16_autocast", "fp16_autocast"} & set(proposed(slow))


def test_a_cpu_with_a_bf16_path_is_advised_bf16_and_an_unknown_one_with_the_condition() -> None:
    fast = diagnose(_cpu_fp32_matmul_run(True, "CPU flags: amx_bf16"))
    assert "bf16_autocast" in [g.fix_id for g in fast.findings]
    unknown = diagnose(_cpu_fp32_matmul_run(None))
    [comp5] = [r for g in unknown.findings for r in (g, *g.related) if r.rule == "COMP005"]
    assert comp5.fix_id == "bf16_autocast" and "AVX512-BF16 or AMX" in comp5.message
