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
    while time.monotonic() < deadline and (
        not out.exists() or len(out.read_text().splitlines()) < 3
    ):
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


def test_the_sampler_process_is_not_counted_as_the_runs_memory_or_cpu(tmp_path: Path) -> None:
    """The sampler is the training process's child: the watchdog's budget, a run's peak and a trial's own CPU
    walk that process's descendants, and must leave Stepwise's own sampler out (its ~100 MB of pandas is not the
    user's batch)."""
    from profilers.telemetry.proctree import OWN_PIDS, Descendants

    tel = TelemetryProcess(tmp_path / "t.jsonl", interval_s=0.05, root_pids=[os.getpid()])
    tel.start()
    try:
        pid = tel._proc.pid if tel._proc is not None else -1
        assert pid in OWN_PIDS
        assert pid not in [p.pid for p in Descendants(psutil.Process(), refresh_s=0.0).get()]
        assert pid in [
            p.pid for p in psutil.Process().children(recursive=True)
        ]  # it is a child all the same
    finally:
        tel.stop()
