"""A run's telemetry reaches the advisor: steady-step summary, DATA005 (saturated host), MEM001 via NVML."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from cli.advisors import main
from profilers.store.runs import RunStore
from profilers.store.files import steps_frame, telemetry_frame
from profilers.telemetry.summary import summarise_telemetry
from tests.app.fake_runs import fake_run
from tests.trace_factory import step, write, x

MS = 1_000_000
T0 = 1_700_000_000 * 10**9


def _steps(n: int = 10, profiled: tuple[int, ...] = (3, 4)) -> pd.DataFrame:
    return steps_frame(
        [
            {
                "rank": 0,
                "step": i,
                "wall_ms": 100.0,
                "loss": 1.0,
                "samples": 8,
                "profiled": i in profiled,
                "t_unix_ns": T0 + i * 100 * MS,
            }
            for i in range(n)
        ]
    )


def test_host_summary_keeps_only_samples_inside_steady_steps() -> None:
    rows = []
    for j in range(
        20
    ):  # every 50 ms over the 10 steps; profiled steps 3-4 and first step 0 look different
        t = T0 + j * 50 * MS + 25 * MS
        step = j // 2
        odd = step in (0, 3, 4)
        rows.append(
            {
                "t_unix_ns": t,
                "t_trace_us": 0.0,
                "source": "host",
                "cpu_pct": 190.0 if odd else 100.0,
                "system_cpu_pct": 99.0 if odd else 60.0,
                "cpu_count": 2,
                "rss_mb": 300.0,
            }
        )
    s = summarise_telemetry(telemetry_frame(rows), _steps())
    assert s is not None and s.source == "host"
    assert s.samples == 14  # steps 1, 2, 5..9: two samples each
    assert s.process_cpu_pct == 100.0 and s.system_cpu_pct == 60.0 and s.cpu_count == 2
    assert s.host_cpu_busy == pytest.approx(0.60)
    assert s.rate_hz == pytest.approx(20.0)


def test_the_machines_cores_are_known_when_no_sample_falls_inside_a_step() -> None:
    """The dashboard walk: a script whose steps took 2 ms (sampling every 100 ms) read "CPU count not
    recorded" and "num_workers=min(max(os.cpu_count(), 2), 8)" though every sample said 2 cores. The core count
    and affinity are the machine's, read from any sample; the load figures stay the steady steps' own."""
    steps = steps_frame(
        [
            {
                "rank": 0,
                "step": i,
                "wall_ms": 2.0,
                "loss": 1.0,
                "samples": 8,
                "profiled": False,
                "t_unix_ns": T0 + 10**9 + i * 2 * MS,
            }
            for i in range(10)
        ]
    )
    rows = [
        {
            "t_unix_ns": T0 + j * 100 * MS,
            "t_trace_us": 0.0,
            "source": "host",
            "cpu_pct": 100.0,
            "system_cpu_pct": 90.0,
            "cpu_count": 2,
            "cpu_affinity": 2,
            "rss_mb": 300.0,
        }
        for j in range(10)
    ]
    s = summarise_telemetry(telemetry_frame(rows), steps)
    assert s is not None and s.samples == 0  # none inside the 20 ms of steps
    assert (
        s.cpu_count == 2
        and s.usable_cores == 2
        and s.system_cpu_pct is None
        and s.host_cpu_busy is None
    )


def test_a_launched_script_profiling_nearly_every_step_keeps_its_profiled_steps() -> None:
    """As ``summarise_steps`` times them: after the first step, profiled ones too when under 3 plain remain."""
    rows = [
        {
            "t_unix_ns": T0 + j * 50 * MS + 25 * MS,
            "t_trace_us": 0.0,
            "source": "host",
            "cpu_pct": 190.0 if j < 2 else 100.0,
            "system_cpu_pct": 60.0,
            "cpu_count": 2,
        }
        for j in range(20)
    ]
    s = summarise_telemetry(telemetry_frame(rows), _steps(profiled=tuple(range(2, 10))))
    assert s is not None and s.samples == 18  # steps 1..9, two samples each (step 0 left out)
    assert s.process_cpu_pct == 100.0


def test_host_busy_falls_back_to_the_process_tree_over_the_core_count() -> None:
    rows = [
        {"t_unix_ns": T0 + j * 100 * MS, "source": "host", "cpu_pct": 150.0, "cpu_count": 4}
        for j in range(10)
    ]
    s = summarise_telemetry(telemetry_frame(rows))
    assert s is not None and s.host_cpu_busy == pytest.approx(150 / 400)
    old = summarise_telemetry(
        telemetry_frame([{k: v for k, v in r.items() if k != "cpu_count"} for r in rows])
    )
    assert old is not None and old.host_cpu_busy is None  # a core count is never guessed


def test_nvml_summary_per_sample_over_gpus() -> None:
    rows = []
    for j in range(10):
        for gpu, util in ((0, 90.0), (1, 50.0)):
            rows.append(
                {
                    "t_unix_ns": T0 + j * 100 * MS,
                    "source": "nvml",
                    "gpu": gpu,
                    "gpu_util_pct": util,
                    "mem_used_mb": 70_000.0 + 100 * j * (gpu == 0),
                    "mem_total_mb": 81_920.0,
                    "power_w": 300.0,
                }
            )
    s = summarise_telemetry(telemetry_frame(rows))
    assert s is not None and s.source == "nvml"
    assert s.rate_hz == pytest.approx(10.0)  # two rows per sample: still 10 samples a second
    assert s.gpu_util_pct == pytest.approx(70.0)  # the mean over the GPUs of each sample
    assert s.gpu_mem_used_mb == 70_900.0 and s.gpu_mem_used_share == pytest.approx(70_900 / 81_920)
    assert s.host_cpu_busy is None


def test_a_gpu_run_samples_the_host_beside_nvml_and_the_summary_reads_both() -> None:
    rows = []
    for j in range(
        10
    ):  # what TelemetrySampler writes with NVML: each GPU's line, then the host's, same time
        t = T0 + j * 100 * MS
        rows += [
            {
                "t_unix_ns": t,
                "source": "nvml",
                "gpu": g,
                "gpu_util_pct": 40.0,
                "mem_used_mb": 9_000.0,
                "mem_total_mb": 81_920.0,
            }
            for g in (0, 1)
        ]
        rows.append(
            {
                "t_unix_ns": t,
                "source": "host",
                "cpu_pct": 380.0,
                "system_cpu_pct": 96.0,
                "cpu_count": 4,
                "rss_mb": 30_000.0,
            }
        )
    s = summarise_telemetry(telemetry_frame(rows))
    assert (
        s is not None
        and s.source == "nvml+host"
        and s.samples == 10
        and s.rate_hz == pytest.approx(10.0)
    )
    assert (
        s.gpu_util_pct == pytest.approx(40.0) and s.gpu_mem_used_mb == 9_000.0
    )  # not the host's RSS
    assert s.host_cpu_busy == pytest.approx(0.96) and s.process_cpu_pct == 380.0
    from profilers.run.records import summarise_steps

    assert (
        summarise_steps(_steps(), telemetry_frame(rows)).peak_memory_mb == 9_000.0
    )  # the device's peak


def _run_with_host(
    tmp_path: Path, system_cpu_pct: float, gpus: int = 0, run_cores: float | None = None
) -> Path:
    """A fake run whose host telemetry shows the machine ``system_cpu_pct`` busy, the run's processes using
    ``run_cores`` of its 2 cores (default: nearly all of the busy ones, the run's own demand)."""
    cpu_pct = 100 * (system_cpu_pct / 100 * 2 * 0.98 if run_cores is None else run_cores)
    store = RunStore(tmp_path / "runs")
    rec = fake_run(store, steps=40)
    run_dir = Path(rec.run_dir)
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    t0, t1 = steps[0]["t_unix_ns"], steps[-1]["t_unix_ns"] + 100 * MS
    with open(run_dir / "telemetry.jsonl", "w") as fh:
        for t in range(t0, t1, 100 * MS):
            for g in range(gpus):
                fh.write(
                    json.dumps(
                        {
                            "t_unix_ns": t,
                            "t_trace_us": 0.0,
                            "source": "nvml",
                            "gpu": g,
                            "gpu_util_pct": 35.0,
                            "mem_used_mb": 5_000.0,
                            "mem_total_mb": 81_920.0,
                        }
                    )
                    + "\n"
                )
            fh.write(
                json.dumps(
                    {
                        "t_unix_ns": t,
                        "t_trace_us": 0.0,
                        "source": "host",
                        "cpu_pct": cpu_pct,
                        "system_cpu_pct": system_cpu_pct,
                        "cpu_count": 2,
                        "rss_mb": 300.0,
                    }
                )
                + "\n"
            )
    return run_dir


def _analyze(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["analyze", str(run_dir), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_saturated_host_makes_caching_the_first_data_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _analyze(_run_with_host(tmp_path, 97.0), capsys)
    assert out["bottleneck"] == "data"
    tel = out["run"]["telemetry"]
    assert (
        tel["source"] == "host"
        and tel["samples"] >= 5
        and tel["host_cpu_busy"] == pytest.approx(0.97)
    )
    first = out["findings"][0]
    assert first["rule"] == "DATA005" and first["fix"]["id"] == "cache_decoded"
    assert (
        first["evidence"]["host_cpu_busy"] == pytest.approx(0.97)
        and first["evidence"]["cpu_count"] == 2
    )


def test_a_gpu_runs_saturated_host_is_judged_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _analyze(_run_with_host(tmp_path, 97.0, gpus=2), capsys)
    tel = out["run"]["telemetry"]
    assert tel["source"] == "nvml+host" and tel["host_cpu_busy"] == pytest.approx(0.97)
    assert tel["gpu_util_pct"] == pytest.approx(35.0)
    assert out["findings"][0]["rule"] == "DATA005"


def test_idle_cores_leave_worker_processes_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _analyze(_run_with_host(tmp_path, 45.0), capsys)
    rules = [f["rule"] for f in out["findings"]]
    assert "DATA005" not in rules and rules[0] == "DATA003"


def test_a_trace_alone_says_host_saturation_is_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "compute.pt.trace.json"
    write(
        trace,
        [
            e
            for i in range(3)
            for e in (step(i, i * 50_000.0, 50_000), x("aten::mm", i * 50_000.0 + 10, 45_000))
        ],
    )
    out = _analyze(trace, capsys)
    assert "run" not in out and out["bottleneck"] != "data"
    assert any("host saturation unknown" in n["reason"] for n in out["not_enough_data"])


def test_host_rows_carry_the_machine_figures_the_summary_needs() -> None:
    import os

    import psutil

    from profilers.telemetry.sampler import HostReader

    import time

    reader = HostReader([os.getpid()])
    first = reader.sample()[0]
    assert (
        first["cpu_count"] == psutil.cpu_count() and first["system_cpu_pct"] is None
    )  # no rate from one reading
    time.sleep(0.1)
    row = reader.sample()[0]
    assert row["cpu_count"] == psutil.cpu_count() and 0.0 <= row["system_cpu_pct"] <= 100.0


def test_a_host_busy_with_other_programs_is_contention_not_saturation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Others took 1.74 of the 2 cores and the script got 0.13: not called saturated, contention named with
    the share lost, and the data advice is not turned against workers."""
    out = _analyze(_run_with_host(tmp_path, 93.5, run_cores=0.13), capsys)
    tel = out["run"]["telemetry"]
    assert tel["host_cpu_busy"] == pytest.approx(0.935) and tel["run_cpu_busy"] == pytest.approx(
        0.065
    )
    assert tel["other_cores"] == pytest.approx(1.74)
    rules = [f["rule"] for f in out["findings"]]
    assert "DATA005" not in rules
    text = json.dumps(out)
    assert "saturat" not in " ".join(f["message"] for f in out["findings"])
    assert "Contention: other programs used 1.74 of the machine's 2 cores" in text
    assert (
        "got 0.13 of the 2 cores they could use" in text
        and "no reason against more DataLoader workers" in text
    )


def test_the_runs_own_demand_is_over_the_cores_it_may_use() -> None:
    """A run pinned to 1 core of 4 that keeps it busy saturates what it could have, though the host is 30% busy."""
    rows = [
        {
            "t_unix_ns": T0 + j * 100 * MS,
            "source": "host",
            "cpu_pct": 98.0,
            "system_cpu_pct": 30.0,
            "cpu_count": 4,
            "cpu_affinity": 1,
        }
        for j in range(10)
    ]
    s = summarise_telemetry(telemetry_frame(rows))
    assert s is not None and s.usable_cores == 1 and s.run_cpu_busy == pytest.approx(0.98)
    assert s.host_cpu_busy == pytest.approx(0.30) and s.other_cores == pytest.approx(0.22)
