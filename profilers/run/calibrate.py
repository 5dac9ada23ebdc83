"""A CPU's measured matmul peak: the peak a CPU run's efficiency (MFU) is read against.

A CPU has no datasheet peak that means much (turbo, AVX-512/AMX, the cores the run gets), so the runner
measures one: square fp32 matmuls of growing size on this machine with the run's intra-op threads, best
of a few repeats, in a child process of the run's interpreter (so Stepwise's own process never imports
torch), once per runner process. The result is stored with the run (``calibration.json``: ``matmul_tflops``,
``size``, ``threads``, ``seconds``) and read by the analysis without torch. On a busy machine the peak reads
low, so the MFU of that run reads high: the value is the machine's rate *as the run found it*.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

CALIBRATION_FILE = "calibration.json"
_PROBE = r"""
import json, time, torch
best, size = 0.0, 0
for n in (256, 512, 1024):
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    for _ in range(3):
        t = time.perf_counter(); reps = 0
        while time.perf_counter() - t < 0.05:
            a @ b; reps += 1
        rate = 2 * n ** 3 * reps / (time.perf_counter() - t) / 1e12
        if rate > best:
            best, size = rate, n
def rate(x, y, n):
    x @ y
    t = time.perf_counter(); reps = 0
    while reps < 1 or time.perf_counter() - t < 0.05:
        x @ y; reps += 1
    return 2 * n ** 3 * reps / (time.perf_counter() - t) / 1e12
n = 512
a, b = torch.randn(n, n), torch.randn(n, n)
fp32 = max(rate(a, b, n) for _ in range(2))
bf16 = max(rate(a.bfloat16(), b.bfloat16(), n) for _ in range(2))
print(json.dumps({"matmul_tflops": best, "size": size, "threads": torch.get_num_threads(),
                  "bf16_vs_fp32": bf16 / fp32, "bf16_size": n}))
"""
#: bf16 matmuls at this fraction of fp32's rate or less: bf16 autocast would slow the run (measured here: an AVX2
#: CPU ran 512² bf16 matmuls far slower than fp32; AVX512-BF16/AMX CPUs run them faster)
BF16_SLOW_BELOW = 0.9


@functools.lru_cache(maxsize=4)
def measure(python: str = sys.executable, timeout_s: float = 60.0) -> dict[str, Any] | None:
    """The measured fp32 matmul peak of this machine (TFLOP/s) with what was measured; ``None`` when the
    interpreter has no torch or the probe fails (the run then says its MFU is unknown)."""
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s)
        found = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None
    return found if isinstance(found, dict) and found.get("matmul_tflops", 0) > 0 else None


def record(run_dir: Path, python: str = sys.executable) -> dict[str, Any] | None:
    """Measure (once per process) and store the calibration in ``run_dir``, with the CPU's bf16 flags; what was
    stored, or ``None``."""
    from stepwise_agent.hostinfo import cpu_bf16_flags

    found = measure(python)
    if found is not None:
        found = {**found, "cpu_bf16_flags": cpu_bf16_flags()}
        (run_dir / CALIBRATION_FILE).write_text(json.dumps(found))
    return found


def read(run_dir: Path) -> float | None:
    """A run's stored CPU matmul peak in TFLOP/s (``None``: not calibrated)."""
    try:
        value = json.loads((run_dir / CALIBRATION_FILE).read_text()).get("matmul_tflops")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def read_bf16(run_dir: Path) -> tuple[bool | None, str]:
    """Whether bf16 autocast can speed this run's CPU: the calibration's measured bf16/fp32 matmul rates first,
    its CPU flags next; ``(None, "")`` when neither was recorded. The string says what decided, in words."""
    try:
        data = json.loads((run_dir / CALIBRATION_FILE).read_text())
    except (OSError, ValueError):
        return None, ""
    if not isinstance(data, dict):
        return None, ""
    ratio, flags = data.get("bf16_vs_fp32"), data.get("cpu_bf16_flags")
    has = f"CPU flags: {flags}" if flags not in (None, "none") else \
        "the CPU has neither avx512_bf16 nor amx_bf16" if flags == "none" else "CPU flags unknown"
    if isinstance(ratio, (int, float)) and ratio > 0:
        size = data.get("bf16_size", 512)
        return ratio > BF16_SLOW_BELOW, (f"bf16 matmuls ({size}×{size}) ran at {ratio:.2f}× fp32's rate on this "
                                         f"machine ({has})")
    if flags is None:
        return None, ""
    return flags != "none", has
