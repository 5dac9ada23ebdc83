"""The worker's telemetry sampler runs in a process of its own (profilers.telemetry.process): a training loop
that holds the GIL (CUDA graph capture, cuDNN autotuning) cannot stall it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil

from profilers.telemetry.process import TelemetryProcess


def test_the_sampler_process_writes_rows_says_its_source_and_ends_on_stop(tmp_path: Path) -> None:
    out = tmp_path / "telemetry.jsonl"
    tel = TelemetryProcess(out, interval_s=0.05, root_pids=[os.getpid()])
    tel.start()
    pid = tel._proc.pid if tel._proc is not None else -1
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 3):
        time.sleep(0.05)
    assert tel.source == "host"  # no NVML here
    assert "sampled in a process of its own" in tel.note and "host telemetry" in tel.note
    tel.stop()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) >= 3 and all(r["source"] == "host" for r in rows)
    assert rows[-1]["cpu_count"] == psutil.cpu_count()


def test_a_sampler_that_never_started_says_so(tmp_path: Path) -> None:
    tel = TelemetryProcess(tmp_path / "t.jsonl")
    assert tel.note == "the telemetry process did not start (no samples)" and tel.source == "host"
    tel.stop()  # nothing to stop: no error
