"""Advice fits the evidence: the collective decides the communication fix, a compiled model is never told to
compile, kernels already in bf16/fp16 are never told to use mixed precision, a loader already in worker
processes is never told to use them, and DataLoader advice quotes the run's own cores and workers. Small
hand-written traces, each with the one fact that decides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.advisors import main
from advisors.facts import Facts, derive
from advisors.fixes import already_done, first_fitting, loader_numbers
from advisors.fixes import FIXES
from advisors.observation import observe
from dataclasses import replace

from profilers.run.run_config import RunConfig
from tests.trace_factory import kernel, step, write, x

STEP_US = 10_000.0


def _analyze(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["analyze", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _fix_ids(out: dict) -> list[str | None]:
    return [f["fix"]["id"] if f["fix"] else None for f in out["findings"]]


def _comm_rank(path: Path, rank: int, collective: str, host_op: str) -> Path:
    """One rank: 2 ms of compute, then a 6 ms collective nothing overlaps, per 10 ms step."""
    ev: list[dict] = []
    for i in range(3):
        t = i * STEP_US
        ev += [
            step(i, t, STEP_US),
            x("aten::linear", t + 10, 1_500),
            kernel("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", t + 100, 2_000),
            x(host_op, t + 2_200, 100),
            x("record_param_comms", t + 2_210, 80),
            kernel(collective, t + 2_300, 6_000, stream=20),
        ]
    return write(path, ev, distributedInfo={"rank": rank, "world_size": 2, "backend": "nccl"})


@pytest.mark.parametrize(
    ("collective", "host_op", "fix", "words"),
    [
        (
            "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)",
            "c10d::alltoall_base_",
            "all_to_all_overlap",
            "all-to-all",
        ),
        (
            "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            "c10d::_allgather_base_",
            "fsdp_prefetch",
            "all-gather",
        ),
        (
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            "c10d::allreduce_",
            "ddp_no_sync",
            "all-reduce",
        ),
    ],
)
def test_the_collective_decides_the_communication_fix(
    collective: str,
    host_op: str,
    fix: str,
    words: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "ranks"
    folder.mkdir()
    for r in (0, 1):
        _comm_rank(folder / f"rank{r}.pt.trace.json", r, collective, host_op)
    out = _analyze(folder, capsys)
    assert out["bottleneck"] == "communication"
    first = out["findings"][0]
    assert first["rule"] == "COMM001" and first["fix"]["id"] == fix and words in first["message"]
    rules = [
        r for f in out["findings"] for r in [f["rule"], *[m["rule"] for m in f.get("rules", [])]]
    ]
    if fix != "ddp_no_sync":  # all-reduce advice never for all-to-all or sharded collectives
        assert not {"ddp_no_sync", "ddp_bucket_size", "grad_compression"} & set(_fix_ids(out))
        assert "COMM002" not in rules


def _compiled_gpu_trace(path: Path) -> Path:
    """A compiled (dynamo region + Triton kernels) bf16 model, GPU busy ~97%, pointwise-heavy."""
    ev: list[dict] = []
    for i in range(3):
        t = i * STEP_US
        ev += [
            step(i, t, STEP_US),
            x("Torch-Compiled Region: 0/0", t + 10, 9_000, cat="user_annotation"),
            x("CompiledFunction", t + 20, 8_900),
        ]
        ev += [
            kernel("triton_poi_fused_add_mul_native_layer_norm_0", t + 100 + k * 1_000, 560)
            for k in range(9)
        ]
        ev += [
            kernel(
                "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
                t + 670 + k * 1_000,
                420,
            )
            for k in range(9)
        ]
    return write(path, ev)


def test_a_compiled_bf16_model_is_never_told_to_compile_or_use_mixed_precision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _analyze(_compiled_gpu_trace(tmp_path / "compiled.pt.trace.json"), capsys)
    facts = derive(observe(tmp_path / "compiled.pt.trace.json"))
    assert facts.compiled and facts.compiled_spans >= 6 and facts.triton_kernel_share > 0.5
    assert facts.gemm_low_precision == 1.0
    fixes = _fix_ids(out)
    assert (
        "torch_compile" not in fixes
        and "bf16_autocast" not in fixes
        and "fp16_autocast" not in fixes
    )
    assert out["bottleneck"] == "memory" and "no cheap fix" in out["findings"][0]["message"]


def test_a_compiled_region_alone_counts_as_compiled(tmp_path: Path) -> None:
    """The dynamo region is a user_annotation: the op table alone never saw it."""
    ev = [
        e
        for i in range(3)
        for e in (
            step(i, i * STEP_US, STEP_US),
            x("Torch-Compiled Region: 0/0", i * STEP_US + 10, 9_000, cat="user_annotation"),
            kernel("void at::native::vectorized_elementwise_kernel<4>", i * STEP_US + 50, 8_000),
        )
    ]
    f = derive(observe(write(tmp_path / "t.pt.trace.json", ev)))
    assert f.compiled and f.compiled_spans == 3 and f.triton_kernel_share == 0.0


def test_a_multi_process_loader_is_never_told_to_use_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ev: list[dict] = []
    for i in range(3):
        t = i * STEP_US
        ev += [
            step(i, t, STEP_US),
            x("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", t + 10, 4_000),
            x("aten::conv2d", t + 4_100, 5_500),
            kernel("volta_scudnn_128x64_relu_interior_nn_v1", t + 4_200, 5_400),
        ]
    out = _analyze(write(tmp_path / "t.pt.trace.json", ev), capsys)
    assert out["bottleneck"] == "data"
    assert "dataloader_workers" not in _fix_ids(out)
    texts = " ".join(
        [out["findings"][0]["message"]]
        + [m["message"] for m in out["findings"][0].get("rules", [])]
    )
    assert "num_workers" not in texts and "workers are on already" in texts


def _facts(spec: RunConfig | None = None, **kw) -> Facts:
    return Facts(has_steps=True, device="gpu", n_steps=4, spec=spec, **kw)


@pytest.mark.parametrize(
    ("fix_id", "doing_it"),
    [
        ("dataloader_workers", dict(num_workers=2)),
        ("cache_decoded", dict(cache_decoded=True)),
        (
            "prefetch_pinned",
            dict(num_workers=2, persistent_workers=True, prefetch_factor=4, pin_memory=True),
        ),
        ("pin_memory", dict(pin_memory=True)),
        ("bf16_autocast", dict(precision="bf16")),
        ("fp16_autocast", dict(precision="fp16")),
        ("tf32", dict(tf32=True)),
        ("torch_compile", dict(compile=True)),
        ("channels_last", dict(channels_last=True)),
        ("cudnn_benchmark", dict(cudnn_benchmark=True)),
        ("fused_optimizer", dict(optimizer_impl="fused")),
        ("cuda_graphs", dict(cuda_graphs=True)),
        ("activation_checkpointing", dict(activation_checkpointing=True)),
        ("ddp_no_sync", dict(ddp_no_sync=True, world_size=2)),
        ("grad_compression", dict(grad_compression="bf16", world_size=2)),
    ],
)
def test_already_done_reads_the_spec(fix_id: str, doing_it: dict) -> None:
    base = RunConfig(workload="gpt_small")
    assert not already_done(fix_id, _facts(base))
    f = _facts(replace(base, **doing_it))
    if fix_id == "torch_compile":  # Facts.compiled carries the run's compile flag (derive sets it)
        f = _facts(replace(base, **doing_it), compiled=True)
    assert already_done(fix_id, f)


def test_already_done_reads_the_trace_without_a_spec() -> None:
    assert already_done("dataloader_workers", _facts(loader_mode="multi_process"))
    assert not already_done("dataloader_workers", _facts(loader_mode="single_process"))
    assert already_done("bf16_autocast", _facts(gemm_low_precision=0.9))
    assert not already_done("bf16_autocast", _facts(gemm_low_precision=0.0))
    assert already_done("torch_compile", _facts(compiled=True))
    assert already_done("pin_memory", _facts(pinned_copy=0.02))
    assert first_fitting(_facts(compiled=True), "torch_compile", "channels_last") == "channels_last"
    assert not already_done(None, _facts()) and not already_done(
        "larger_batch", _facts(compiled=True)
    )


def test_loader_numbers_quote_the_runs_cores_and_workers() -> None:
    from advisors.synthetic import run_facts
    from profilers.telemetry.summary import TelemetrySummary

    # the run's processes keep 3 of its 4 cores busy: one worker per core, no more
    tel = TelemetrySummary(
        source="host", samples=30, rate_hz=10.0, cpu_count=4, process_cpu_pct=300.0
    )
    spec = RunConfig(workload="data_bound", num_workers=0)
    n = loader_numbers(_facts(spec, run=run_facts(telemetry=tel, spec=spec)))
    assert (n.cores, n.current, n.suggested) == (
        4,
        0,
        4,
    ) and n.phrase() == "num_workers=4 (4 cores; now 0)"
    many = loader_numbers(
        _facts(RunConfig(workload="data_bound", num_workers=6), run=run_facts(telemetry=tel))
    )
    assert many.suggested == 12  # room on the cores: the trial's count, twice the 6 now
    unknown = loader_numbers(_facts(loader_mode="single_process"))
    assert (
        unknown.cores is None
        and "os.cpu_count()" in unknown.phrase()
        and "now 0" in unknown.phrase()
    )


def test_no_snippet_hard_codes_a_worker_count() -> None:
    for fix in FIXES.values():
        assert "num_workers=4" not in fix.snippet, fix.id
    assert "os.cpu_count()" in FIXES["dataloader_workers"].snippet


def test_a_trace_without_the_cpu_count_suggests_the_formula_not_a_number() -> None:
    """Issue 23's polish: a report read "suggested workers 2" beside "CPU count not recorded"."""
    from advisors.rules.data.single_process import SingleProcessLoading
    from advisors.synthetic import observation

    facts = observation(
        {"gpu_compute": 0.5, "dataloader": 0.4},
        ops={"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__": 0.4},
    )
    from advisors.facts import derive

    finding = SingleProcessLoading().check(derive(facts))
    assert finding is not None and finding.evidence["cpu_count"] is None
    assert finding.evidence["suggested_workers"] == "min(max(os.cpu_count(), 2), 8)"
    assert "os.cpu_count()" in finding.message
