"""CUDA graphs come first only for a launch-bound step: many short kernels that end before the
next launch arrives. A step whose work is long fp32 convolutions gets mixed precision first even
when its GPU idles a third of the step; a step of small GEMMs whose host spends a few hundred µs a
launch inside its operators gets CUDA graphs, not HOST003's "find the host code" alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisors.diagnosis import diagnose
from advisors.facts import derive
from advisors.observation import Observation, observe
from advisors.ranking import rank
from advisors.rules import rule_by_id
from advisors.synthetic import observation

TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces"
RESNET = TRACES / "compute" / "kineto_resnet50_num_workers_4.pt.trace.json.gz"
BERT = TRACES / "host" / "tracelens_h100_bert-small.json.gz"


def _big_convs(idle: float) -> Observation:
    """A 139-ms fp32 CNN step: kernels of ~130 µs carry 70% of kernel time, among 1480 launches
    of median 2 µs."""
    work = 1.0 - idle - 0.02
    return observation(
        {
            "gpu_compute": work,
            "gpu_memcpy": 0.02,
            "forward": idle * 0.6,
            "host_runtime": idle * 0.3,
        },
        step_ms=139,
        kernels_per_step=1480,
        median_kernel_us=2,
        kernels={"matmul": 0.7 * work, "normalization": 0.15 * work, "elementwise": 0.15 * work},
    )


def _small_gemms(per_launch_us: float, python: bool = False) -> Observation:
    """A step of 10 small GEMM/elementwise kernels, the GPU idle 90%: ``per_launch_us`` of idle per
    launch, two thirds of it inside operators and runtime calls (``python``: one ninth, the rest
    in Python no operator covers)."""
    host = {"forward": 0.1} if python else {"forward": 0.5, "host_runtime": 0.1}
    return observation(
        {"gpu_compute": 0.1, **host},
        kernels={"matmul": 0.08, "elementwise": 0.02},
        median_kernel_us=8,
        kernels_per_step=10,
        step_ms=10 * per_launch_us / 0.9 / 1e3,
    )


@pytest.mark.parametrize("idle", [0.32, 0.4, 0.5])
def test_a_step_of_long_convolutions_gets_mixed_precision_first(idle: float) -> None:
    d = diagnose(_big_convs(idle))
    rules = {m.rule for f in d.findings for m in (f, *f.related)}
    assert "HOST001" not in rules and "HOST003" in rules  # the idle named as host time, no graphs
    first = rank(d).order[0]
    assert first.rule == "COMP001" and first.fix_id == "bf16_autocast"
    assert "cuda_graphs" not in {f.fix_id for f in rank(d).order}


@pytest.mark.parametrize("per_launch_us", [60.0, 180.0, 420.0, 1500.0])
def test_a_launch_bound_small_gemm_step_gets_cuda_graphs_first(per_launch_us: float) -> None:
    d = diagnose(_small_gemms(per_launch_us))
    assert d.binding is not None and d.binding.rule == "HOST001"
    assert d.binding.fix_id == "cuda_graphs" and rank(d).order[0].fix_id == "cuda_graphs"
    assert d.binding.evidence["short_kernel_share"] == pytest.approx(1.0)
    assert d.binding.evidence["idle_per_launch_us"] == pytest.approx(per_launch_us, rel=0.01)


@pytest.mark.parametrize("per_launch_us", [180.0, 1500.0])
def test_python_between_the_kernels_stays_host_work(per_launch_us: float) -> None:
    d = diagnose(_small_gemms(per_launch_us, python=True))  # Python between kernels, not launches
    assert d.binding is not None and d.binding.rule == "HOST003" and d.binding.fix_id is None
    assert "cuda_graphs" not in {f.fix_id for f in rank(d).order}


def test_tens_of_microseconds_a_launch_are_launches_wherever_the_host_spends_them() -> None:
    d = diagnose(_small_gemms(60.0, python=True))
    assert d.binding is not None and d.binding.rule == "HOST001"
    assert d.binding.fix_id == "cuda_graphs"


def test_short_kernel_share_reads_kernel_time_against_the_launch_period() -> None:
    f = derive(_big_convs(0.32))
    assert f.launch_period_us == pytest.approx(139e3 / 1480)
    assert f.short_kernel_share == pytest.approx(0.3, abs=0.01)  # normalization, elementwise
    assert derive(observation({"gpu_compute": 0.5})).short_kernel_share is None  # no kernels


def test_the_real_resnet50_is_not_launch_bound_even_below_the_idle_floor() -> None:
    """The shared V100 resnet50 (fp32, 127 ms a step, GPU idle 27%): with HOST001's idle floor
    lowered under its idle, the rule still does not call it launch-bound — its short kernels hold
    17% of kernel time — while the host-work rule, given the same floor, names the idle;
    bert-small's short kernels hold all of it."""
    resnet = derive(observe(RESNET))
    assert resnet.short_kernel_share is not None and resnet.short_kernel_share < 0.25
    assert rule_by_id("HOST001")({"min_idle_share": 0.2}).evaluate(resnet) is None
    assert rule_by_id("HOST003")({"min_idle_share": 0.2}).evaluate(resnet) is not None
    assert derive(observe(BERT)).short_kernel_share == pytest.approx(1.0)
    first = rank(diagnose(observe(RESNET))).order[0]
    assert first.fix_id == "fp16_autocast"  # a V100: fp16 with a GradScaler


def test_the_old_schema_small_gemm_step_gets_cuda_graphs() -> None:
    """The shared old-schema kineto step (a small linear model on a V100: 30 kernels of 1–3 µs,
    small sgemm/gemv ones among them, the GPU busy under 1%): 420 µs of idle per launch, three
    quarters of it inside operators and runtime calls — an old PyTorch's launches, not Python
    between them."""
    d = diagnose(observe(TRACES / "edge" / "kineto_old_schema_gpu_metrics.json"))
    assert d.binding is not None and d.binding.rule == "HOST001"
    ev = d.binding.evidence
    assert ev["idle_per_launch_us"] > 300 and ev["launch_path_share"] > 0.7
    assert ev["short_kernel_share"] == 1.0
    assert rank(d).order[0].fix_id == "cuda_graphs"
