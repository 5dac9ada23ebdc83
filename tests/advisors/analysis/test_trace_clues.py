"""Verdicts read the clues a trace carries (issue 33): the GPU architecture in kernel names when the trace does
not name its device, the device-active window of a trace without step markers, and the Python functions a
``with_stack`` trace recorded. Small hand-made traces, each with the one clue that decides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.advisors import main
from profilers.efficiency.arch import arch_of, infer_arch
from tests.trace_factory import kernel, step, write, x

STEP_US = 10_000.0


def _analyze(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["analyze", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _fp32_gemm_trace(path: Path, gemm: str, conv: str, **top: object) -> Path:
    """A busy GPU running fp32 GEMMs and convolutions (no deviceProperties unless given)."""
    ev: list[dict] = []
    for i in range(4):
        t = i * STEP_US
        ev += [
            step(i, t, STEP_US),
            x("aten::linear", t + 10, 200, **{"Input type": ["float", "float"]}),
            kernel(gemm, t + 100, 6_000),
            kernel(conv, t + 6_200, 3_000),
        ]
    return write(path, ev, **top)


@pytest.mark.parametrize(
    ("name", "sm"),
    [
        ("volta_sgemm_128x64_nn", 70),
        ("volta_scudnn_128x64_relu_interior_nn_v1", 70),
        ("turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn", 75),
        ("ampere_sgemm_64x32_sliced1x4_nn", 80),
        ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8", 80),
        ("sm90_xmma_gemm_bf16bf16_bf16f32", 90),
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)", 80),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>", None),
    ],
)
def test_kernel_names_say_their_architecture(name: str, sm: int | None) -> None:
    assert arch_of(name) == sm


def test_the_newest_architecture_named_is_the_floor() -> None:
    arch = infer_arch(["volta_sgemm_128x64_nn", "sm80_xmma_gemm_f32f32", "elementwise_kernel"])
    assert arch is not None and (arch.name, arch.sm) == ("Ampere", 80) and arch.fast_bf16


def test_a_volta_trace_without_device_properties_is_advised_fp16_not_bf16(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _analyze(
        _fp32_gemm_trace(
            tmp_path / "v.json", "volta_sgemm_128x64_nn", "volta_scudnn_128x64_relu_interior_nn_v1"
        ),
        capsys,
    )
    assert out["device_name"] == "GPU" and out["device_arch"]["name"] == "Volta"
    fixes = [f["fix"]["id"] for f in out["findings"] if f["fix"]]
    assert "fp16_autocast" in fixes and "bf16_autocast" not in fixes and "tf32" not in fixes
    gemm = next(f for f in out["findings"] if f["fix"] and f["fix"]["id"] == "fp16_autocast")
    assert "GradScaler" in gemm["message"] and "Volta" in gemm["message"]
    assert "inferred from kernel names such as volta_" in gemm["message"]


def test_an_ampere_trace_without_device_properties_keeps_bf16(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _analyze(
        _fp32_gemm_trace(
            tmp_path / "a.json",
            "ampere_sgemm_128x64_nn",
            "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nhwckrsc_nhwc",
        ),
        capsys,
    )
    assert out["device_arch"]["name"] == "Ampere"
    assert "bf16_autocast" in [f["fix"]["id"] for f in out["findings"] if f["fix"]]


def test_a_named_device_is_not_inferred(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _analyze(
        _fp32_gemm_trace(
            tmp_path / "n.json",
            "volta_sgemm_128x64_nn",
            "volta_scudnn_128x64_relu_nn",
            deviceProperties=[
                {"id": 0, "name": "Tesla V100-SXM2-16GB", "totalGlobalMem": 16 * 2**30}
            ],
        ),
        capsys,
    )
    assert out["device_arch"] is None
    gemm = next(f for f in out["findings"] if f["fix"] and f["fix"]["id"] == "fp16_autocast")
    assert "V100 SXM2" in gemm["message"] and "inferred" not in gemm["message"]


def test_the_device_card_and_report_name_the_inferred_architecture(tmp_path: Path) -> None:
    from advisors.analysis import analyse
    from reports.export import render

    a = analyse(
        _fp32_gemm_trace(tmp_path / "v.json", "volta_sgemm_128x64_nn", "volta_scudnn_128x64_nn")
    )
    assert (
        a.breakdown is not None
        and a.breakdown.device_label == "Volta GPU (inferred from kernel names)"
    )
    assert "GPU (Volta GPU (inferred from kernel names))" in render(a, "md").decode()


def test_a_cpu_trace_is_called_cpu_once(tmp_path: Path) -> None:
    from advisors.analysis import analyse
    from reports.export import render

    ev = [step(0, 0, 1000), x("aten::mm", 10, 900)]
    md = render(analyse(write(tmp_path / "c.json", ev)), "md").decode()
    assert "CPU (CPU)" not in md and "| CPU |" in md


def test_a_trace_without_markers_is_read_over_its_device_active_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """3 ms of host start-up before the first kernel, then 6 ms of a busy GPU: the step is the 6 ms (the whole
    window read as one step made it a third idle, and host-bound)."""
    ev = [x("aten::empty", 0, 10), x("<built-in method load of torch>", 20, 2_900)]
    for i in range(6):
        t = 3_000 + i * 1_000
        ev += [x("aten::linear", t, 50), kernel("ampere_sgemm_128x64_nn", t + 10, 980)]
    out = _analyze(write(tmp_path / "lead.json", ev), capsys)
    assert out["steps_inferred"] and out["step_time_ms"] == pytest.approx(
        5.98
    )  # first kernel 3.01 ms, last ends 8.99
    assert out["gpu_busy_share"] > 0.9 and out["bottleneck"] != "host"
    note = next(w for w in out["warnings"] if "ProfilerStep" in w)
    assert "device-active window" in note and "up to 3.0 ms" in note


def test_a_host_only_trace_without_markers_keeps_its_whole_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _analyze(
        write(tmp_path / "cpu.json", [x("aten::mm", 0, 400), x("aten::add", 500, 500)]), capsys
    )
    assert out["step_time_ms"] == pytest.approx(1.0)
    assert any("whole trace window" in w for w in out["warnings"])


def _python_trace(path: Path) -> Path:
    """Per 10 ms step: 3 ms of kernels, then the host runs the user's log_metrics (which sleeps in a built-in)
    for 6 ms while the GPU idles; frames recorded by with_stack=True."""
    ev: list[dict] = []
    for i in range(3):
        t = i * STEP_US
        ev += [
            step(i, t, STEP_US),
            x("train.py(30): <module>", t + 1, STEP_US - 2, cat="python_function"),
            x("/home/u/proj/train.py(12): train_step", t + 2, 3_000, cat="python_function"),
            x("aten::linear", t + 10, 100),
            kernel("ampere_sgemm_128x64_nn", t + 100, 3_000),
            x("/home/u/proj/train.py(40): log_metrics", t + 3_500, 6_000, cat="python_function"),
            x("<built-in function sleep>", t + 3_600, 5_800, cat="python_function"),
            x(
                "/usr/lib/python3.11/site-packages/tqdm/std.py(1180): __iter__",
                t + 9_550,
                300,
                cat="python_function",
            ),
        ]
    return write(path, ev)


def test_a_host_bound_verdict_names_the_python_functions_holding_the_gpu_idle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _analyze(_python_trace(tmp_path / "py.json"), capsys)
    assert out["bottleneck"] == "host"
    host = next(f for f in out["findings"] if f["rule"] == "HOST003")
    assert "log_metrics (proj/train.py:40) 60% of the step" in host["message"]
    assert "<built-in function sleep>" not in host["message"] and "py-spy" not in host["message"]


def test_python_idle_charges_library_frames_to_the_user_caller(tmp_path: Path) -> None:
    from profilers.trace.breakdown import breakdown
    from profilers.trace.load import load_trace

    t = breakdown(load_trace(_python_trace(tmp_path / "py.json"))).python_idle
    charged = dict(zip(t["name"], t["idle_ns"]))
    assert (
        charged["/home/u/proj/train.py(40): log_metrics"] == 3 * 6_000_000
    )  # its own 0.2 ms + sleep's 5.8 ms
    assert "<built-in function sleep>" not in charged and "train.py(30): <module>" in charged
    # <module>'s own idle (1 + 400 + 50 + 149 µs between its callees) and tqdm's 300 µs (a library frame: its caller's)
    assert charged["train.py(30): <module>"] == 3 * (1 + 400 + 50 + 149 + 300) * 1000
    assert (
        charged["/home/u/proj/train.py(12): train_step"] == 3 * 98 * 1000
    )  # before the first kernel starts


def test_a_snapshot_without_its_device_size_states_its_peak_and_asks_for_the_device(
    shared_traces: Path,
) -> None:
    from advisors.analysis import analyse
    from reports.export import render

    a = analyse(shared_traces / "memory/cs336_memory_snapshot.pickle")
    assert a.diagnosis is not None and a.diagnosis.binding is None  # a peak alone never binds
    assert (
        a.headline.startswith("Memory snapshot: peak live 12.97 GiB")
        and "device's size" in a.headline
    )
    assert "within 10% of capacity" not in a.headline and "no memory pressure" not in a.headline
    md = render(a, "md").decode()
    assert "Binding bottleneck" not in md and "12.97 GiB" in md


def test_a_snapshot_with_its_device_size_is_judged(shared_traces: Path) -> None:
    from advisors.analysis import analyse

    small = analyse(
        shared_traces / "memory/cs336_memory_snapshot.pickle", device_memory_bytes=14 * 2**30
    )
    big = analyse(
        shared_traces / "memory/cs336_memory_snapshot.pickle", device_memory_bytes=80 * 2**30
    )
    assert small.diagnosis is not None and small.diagnosis.bottleneck.value == "memory"
    assert big.diagnosis is not None and big.diagnosis.binding is None
    assert "on an 80 GiB device" in big.headline and "no memory pressure" in big.headline


@pytest.mark.parametrize(
    ("gib", "words"),
    [
        (80, "an 80 GiB device"),
        (16, "a 16 GiB device"),
        (11, "an 11 GiB device"),
        (24, "a 24 GiB device"),
        (8, "an 8 GiB device"),
        (40, "a 40 GiB device"),
    ],
)
def test_device_sizes_take_the_right_article(gib: int, words: str) -> None:
    from profilers.trace.memory_snapshot import gib_device

    assert gib_device(gib * 2**30) == words


def test_every_peak_table_name_finds_its_own_row() -> None:
    from profilers.efficiency.peaks import PEAK_NAMES, device_peak

    assert all((p := device_peak(name)) is not None and p.name == name for name in PEAK_NAMES)


def _change(ts: float, nbytes: int) -> dict:
    """An older Kineto ``[memory]`` event: the byte change only, no totals."""
    return {
        "ph": "i",
        "name": "[memory]",
        "pid": 100,
        "tid": 1,
        "ts": ts,
        "s": "t",
        "args": {"Device Type": 1, "Device Id": 0, "Bytes": nbytes},
    }


def test_memory_over_time_is_built_from_byte_changes(tmp_path: Path) -> None:
    """+3 MiB, +5 MiB, −2 MiB, −6 MiB: the curve reads 3, 8, 6, 0 MiB, and the peak is 8 MiB (was a flat 0)."""
    from profilers.trace.breakdown import breakdown
    from profilers.trace.load import load_trace
    from profilers.frames.timeline import memory_series

    mib = 2**20
    ev = [
        step(0, 0, 1000),
        kernel("k", 10, 900),
        _change(100, 3 * mib),
        _change(200, 5 * mib),
        _change(300, -2 * mib),
        _change(400, -6 * mib),
    ]
    t = load_trace(write(tmp_path / "m.json", ev))
    assert memory_series(t)["allocated_mb"].tolist() == [3.0, 8.0, 6.0, 0.0]
    assert breakdown(t).memory.device_allocated_bytes == 8 * mib
    assert any("byte changes, not totals" in w for w in t.warnings)


def test_memory_totals_when_recorded_are_kept_as_they_are(tmp_path: Path) -> None:
    from profilers.trace.load import load_trace
    from tests.trace_factory import memory

    ev = [
        step(0, 0, 1000),
        kernel("k", 10, 900),
        memory(100, 5 * 2**20, 8 * 2**20),
        memory(200, 7 * 2**20, 8 * 2**20),
    ]
    t = load_trace(write(tmp_path / "m.json", ev))
    assert t.memory["total_allocated"].tolist() == [5 * 2**20, 7 * 2**20]
    assert not any("byte changes" in w for w in t.warnings)


def test_a_saturated_cpu_and_the_telemetry_line_name_the_same_two_numbers() -> None:
    """The verdict's "48%" is the run's own share of its cores; the telemetry line's "99%" the whole host's:
    each place names which (was "the host's cores 48% busy" under "2 host cores 99% busy")."""
    from advisors.diagnosis import diagnose
    from advisors.synthetic import observation, run_facts
    from profilers.telemetry.summary import TelemetrySummary

    tel = TelemetrySummary(
        source="host",
        samples=40,
        rate_hz=10.0,
        cpu_count=2,
        process_cpu_pct=96.0,
        system_cpu_pct=99.0,
    )
    d = diagnose(
        observation(
            {"forward": 0.3, "backward": 0.5, "optimizer": 0.1},
            device="cpu",
            run=run_facts(telemetry=tel),
        )
    )
    sat = next(f for f in (d.binding, *d.others) if f is not None and f.rule == "COMP002")
    assert "this run's processes keeping 48% of its cores busy" in sat.message
    assert "the host's cores 48%" not in sat.message
    assert tel.describe().endswith("2 host cores 99% busy (this run's processes 48% of its cores)")
