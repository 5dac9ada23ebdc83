"""Telemetry: the NVML path through FakeNvml, the psutil host fallback, the trace clock, tolerant reading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from profilers.telemetry.sampler import (
    FakeNvml,
    HostReader,
    TelemetrySampler,
    kineto_base_ns,
    probe_nvml,
    read_telemetry,
)

NVML_KEYS = {
    "gpu_util_pct",
    "mem_used_mb",
    "mem_total_mb",
    "power_w",
    "sm_clock_mhz",
    "temp_c",
    "pcie_tx_kbps",
    "pcie_rx_kbps",
}


def test_probe_never_raises_and_explains_itself() -> None:
    ok, reason = probe_nvml()  # the real pynvml: False on this machine, True on a GPU box
    assert isinstance(ok, bool) and reason
    assert probe_nvml(FakeNvml(gpus=2)) == (True, "NVML sees 2 GPU(s)")
    ok, reason = probe_nvml(FakeNvml(fail_init=True))
    assert not ok and "Driver Not Loaded" in reason
    assert probe_nvml(FakeNvml(gpus=0)) == (False, "NVML found no GPU")
    assert probe_nvml(object())[0] is False  # not even an NVML module


def test_nvml_path_writes_one_line_per_gpu_with_every_metric(tmp_path: Path) -> None:
    fake = FakeNvml(gpus=2, unsupported=("nvmlDeviceGetPowerUsage",))
    sampler = TelemetrySampler(tmp_path / "t.jsonl", source=fake)
    assert sampler.source == "nvml" and "2 GPU" in sampler.note and "host" in sampler.note
    with (tmp_path / "t.jsonl").open("w") as fh:
        sampler.sample_once(fh)
        sampler.sample_once(fh)
    all_rows = read_telemetry(tmp_path / "t.jsonl")
    assert (
        all_rows["source"].tolist() == ["nvml", "nvml", "host"] * 2
    )  # each sample: every GPU, then the host
    assert all_rows.groupby("t_unix_ns").size().tolist() == [3, 3]  # one time per sample
    df = all_rows[all_rows["source"] == "nvml"]
    assert len(df) == 4 and sorted(df["gpu"].unique()) == [0, 1]
    assert NVML_KEYS <= set(df.columns)
    assert df["power_w"].isna().all()  # unsupported metric → missing, not a crash
    assert df["mem_total_mb"].eq(16000).all() and df["temp_c"].tolist() == [60, 61, 60, 61]
    host = all_rows[all_rows["source"] == "host"]
    assert (
        host["gpu"].isna().all() and host["cpu_count"].notna().all() and host["rss_mb"].gt(0).all()
    )
    for name in (
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetPcieThroughput",
        "nvmlDeviceGetHandleByIndex",
    ):
        assert fake.calls.get(name, 0) > 0, name


def test_forcing_nvml_without_a_gpu_is_an_error_and_auto_falls_back_to_host(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="unavailable"):
        TelemetrySampler(tmp_path / "t.jsonl", source=FakeNvml(fail_init=True))
    if not probe_nvml()[0]:
        auto = TelemetrySampler(tmp_path / "t.jsonl")
        assert auto.source == "host" and auto.note.startswith("NVML unavailable: ")
        assert auto.note.endswith("host telemetry via psutil")


def test_host_rss_counts_children_such_as_dataloader_workers() -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys,time; b = bytearray(150 * 2**20); b[::4096] = b'x' * len(b[::4096]);"
            "print('ready', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        own = psutil.Process().memory_info().rss / 2**20
        row = HostReader([os.getpid()]).sample()[0]
        assert row["rss_mb"] > own + 100  # the child's 150 MB of private pages
        assert set(row) == {
            "cpu_pct",
            "monitor_cpu_pct",
            "system_cpu_pct",
            "cpu_count",
            "cpu_affinity",
            "rss_mb",
            "read_mb_s",
            "write_mb_s",
        }
    finally:
        child.kill()
        child.wait()


def _wait_for_lines(path: Path, n: int, timeout_s: float = 20.0) -> None:
    """Until ``path`` holds ``n`` complete lines (a live reader's view), polling; fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.read_text().count("\n") >= n):
        assert time.monotonic() < deadline, f"fewer than {n} telemetry lines after {timeout_s} s"
        time.sleep(0.005)


def test_sampler_thread_writes_live_lines_and_stops(tmp_path: Path) -> None:
    """The real thread, real clock: lines appear while it runs (the schedule itself is tested on a fake clock
    in test_telemetry_schedule.py)."""
    path = tmp_path / "t.jsonl"
    sampler = TelemetrySampler(path, interval_s=0.02, source="host")
    sampler.start()
    _wait_for_lines(path, 3)
    sampler.stop()
    assert not sampler.is_alive()
    df = read_telemetry(path)
    assert len(df) >= 3 and df["t_unix_ns"].is_monotonic_increasing
    assert (df["rss_mb"] > 0).all() and set(df["source"]) == {"host"}


def test_stop_wakes_the_sampler_from_its_wait(tmp_path: Path) -> None:
    """A minute between samples, yet stop() ends the thread long before the next one is due: the default sleep
    waits on the stop event. No clock is read: a thread still asleep would be alive for the rest of the minute,
    and the join below waits half of it (stop() itself gives up joining after 2 s, short on a busy machine)."""
    path = tmp_path / "t.jsonl"
    sampler = TelemetrySampler(path, interval_s=60.0, source="host")
    sampler.start()
    _wait_for_lines(path, 1)
    sampler.stop()
    sampler.join(timeout=30.0)
    assert not sampler.is_alive()
    assert len(read_telemetry(path)) == 1


def test_read_telemetry_skips_a_truncated_last_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = [
        {"t_unix_ns": 2, "t_trace_us": 1.0, "source": "host", "cpu_pct": 5.0},
        {"t_unix_ns": 1, "t_trace_us": 0.5, "source": "host", "cpu_pct": 3.0},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in good) + '{"t_unix_ns": 3, "cpu_')
    df = read_telemetry(path)
    assert df["t_unix_ns"].tolist() == [1, 2]  # sorted, the partial line dropped
    assert read_telemetry(tmp_path / "missing.jsonl").empty


def test_kineto_base_and_trace_clock_match_a_real_trace(tmp_path: Path) -> None:
    """A timestamp taken inside a record_function span maps, via t_trace_us, inside that span."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("stepwise_probe"):
            time.sleep(0.01)
            inside_ns = time.time_ns()
            time.sleep(0.01)
            torch.ones(4).sum()
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert int(trace["baseTimeNanoseconds"]) == kineto_base_ns(inside_ns)
    (span,) = [e for e in trace["traceEvents"] if e.get("name") == "stepwise_probe"]
    t_trace_us = (inside_ns - kineto_base_ns(inside_ns)) / 1000
    assert span["ts"] + 5_000 < t_trace_us < span["ts"] + span["dur"] - 5_000
