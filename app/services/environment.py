"""What this machine offers, for the sidebar: the device and which telemetry a run would record.

Pure (reads the machine, writes nothing) and cheap; no torch import, so the dashboard starts fast: a GPU is
detected through NVML, the same probe the telemetry sampler uses.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from profilers.telemetry.sampler import probe_nvml


@dataclass(frozen=True)
class Environment:
    """``device`` and ``telemetry`` are one plain sentence each; ``nvml_live`` says which telemetry is used."""

    device: str
    telemetry: str
    nvml_live: bool
    cpu_count: int
    memory_gib: float


def detect() -> Environment:
    """Probe NVML and the host; never raises."""
    ok, reason = probe_nvml()
    cpus = os.cpu_count() or 1
    mem = psutil.virtual_memory().total / 1024**3
    if ok:
        device = f"GPU — {reason}; host: {cpus} CPU cores, {mem:.0f} GiB RAM"
        telemetry = (
            "NVML telemetry is live: GPU utilisation, memory, power and clocks at 10 Hz, with the host's "
            "CPU and memory (psutil) beside them."
        )
    else:
        device = f"CPU only — {cpus} cores, {mem:.0f} GiB RAM; no NVIDIA GPU visible"
        telemetry = (
            "NVML telemetry is unavailable, so runs record host telemetry (psutil: CPU %, RSS, I/O) "
            f"instead. NVML said: {reason}"
        )
    return Environment(
        device=device, telemetry=telemetry, nvml_live=ok, cpu_count=cpus, memory_gib=mem
    )
