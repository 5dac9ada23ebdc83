"""A CPU's measured matmul peak: the peak a CPU run's efficiency (MFU) is read against.

A CPU has no datasheet peak that means much (turbo, AVX-512/AMX, the cores the run gets), so the runner
measures one: square fp32 matmuls of growing size on this machine with the run's intra-op threads, best
of a few repeats, in a child process of the run's interpreter (so Stepwise's own process never imports
torch). Whether bf16 is a fix rests on it too, and a one-off reading flipped with the load (0.62×, 2.00×,
7.56× of fp32 within 45 minutes on one CPU): bf16 and fp32 are now sampled in :data:`ROUNDS` interleaved
pairs, read as the median of the pairs' ratios with their spread recorded (:func:`summarise`), and bf16 is
advised only when the two are :data:`CLEARLY_APART` and the pairs agree. The result is cached per machine, CPU,
interpreter and torch build (:func:`cache_dir`) and measured again only when it is a week old or was taken on a
busy machine (a type's median sample under :data:`CONTENDED_BELOW_BEST` of its best), so ``analyze`` and
``optimize`` on one machine read the same calibration. The result is stored with the run (``calibration.json``: ``matmul_tflops``,
``size``, ``threads``, ``seconds``) and read by the analysis without torch. On a busy machine the peak reads
low, so the MFU of that run reads high: the value is the machine's rate *as the run found it*.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CALIBRATION_FILE = "calibration.json"
ROUNDS = (
    9  # interleaved fp32/bf16 repeats: a burst of load from another program cannot hit every one
)
_PROBE = r"""
import json, sys, time, torch
def rate(x, y, n, seconds):
    x @ y
    t = time.perf_counter(); reps = 0
    while reps < 1 or time.perf_counter() - t < seconds:
        x @ y; reps += 1
    return 2 * n ** 3 * reps / (time.perf_counter() - t) / 1e12
best, size = 0.0, 0
for n in (256, 512, 1024):
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        r = rate(a, b, n, 0.05)
        if r > best:
            best, size = r, n
n = 512
a, b = torch.randn(n, n), torch.randn(n, n)
a16, b16 = a.bfloat16(), b.bfloat16()
fp32, bf16 = [], []
for i in range(int(sys.argv[1])):  # interleaved, each type first in turn
    pair = ((fp32, a, b), (bf16, a16, b16)) if i % 2 == 0 else ((bf16, a16, b16), (fp32, a, b))
    for out, x, y in pair:
        out.append(rate(x, y, n, 0.03))
print(json.dumps({"matmul_tflops": best, "size": size, "threads": torch.get_num_threads(), "bf16_size": n,
                  "fp32_rates": fp32, "bf16_rates": bf16, "torch": torch.__version__}))
"""
#: bf16 matmuls at this fraction of fp32's rate or less: bf16 autocast would slow the run (measured here: an AVX2
#: CPU ran 512² bf16 matmuls far slower than fp32; AVX512-BF16/AMX CPUs run them faster)
BF16_SLOW_BELOW = 0.9
#: bf16 is a fix on a CPU only when its best rate is this many times fp32's best (and the pairs agree): within
#: it the two are too close to call, and the advice must not flip with the machine's load
CLEARLY_APART = 1.15
CONTENDED_BELOW_BEST = (
    0.7  # a type whose median sample is under this share of its best: the machine was busy
)
STALE_AFTER_S = 7 * 24 * 3600


def summarise(fp32_rates: list[float], bf16_rates: list[float]) -> dict[str, Any]:
    """The bf16/fp32 verdict from interleaved samples. Each back-to-back pair (60 ms) shares the machine's load of
    that moment, so the ratio is the median of the pairs' ratios, with their quartiles as its spread; the ratio
    of the two types' *best* rates (load only ever slows a sample) must point the same way. The decision —
    ``faster``, ``slower`` or ``unclear`` — needs the median :data:`CLEARLY_APART` from 1 and three pairs in four
    on its side: within that the two are too close to call, and advice must not flip with the load."""
    pairs = sorted(b / a for a, b in zip(fp32_rates, bf16_rates) if a > 0 and b > 0)
    if not pairs:
        return {"bf16_vs_fp32": None, "bf16_decision": "unclear"}
    median = statistics.median(pairs)
    q1, q3 = (
        statistics.quantiles(pairs, n=4, method="inclusive")[::2]
        if len(pairs) > 1
        else (pairs[0], pairs[0])
    )
    best = max(bf16_rates) / max(fp32_rates)
    if median >= CLEARLY_APART and q1 > 1.0 and best > 1.0:
        decision = "faster"
    elif median <= 1 / CLEARLY_APART and q3 < 1.0 and best < 1.0:
        decision = "slower"
    else:
        decision = "unclear"
    busy = min(statistics.median(r) / max(r) for r in (fp32_rates, bf16_rates))
    return {
        "bf16_vs_fp32": median,
        "bf16_best_ratio": best,
        "bf16_pair_spread": [q1, q3],
        "bf16_samples": len(pairs),
        "bf16_decision": decision,
        "contended": busy < CONTENDED_BELOW_BEST,
    }


def cache_dir() -> Path:
    """Where calibrations are kept per machine and torch build (``STEPWISE_CALIBRATION_DIR`` overrides)."""
    return Path(
        os.environ.get("STEPWISE_CALIBRATION_DIR")
        or Path.home() / ".cache" / "stepwise" / "calibration"
    )


def _cache_key(python: str) -> str | None:
    """This machine, CPU, interpreter and torch build, without importing torch (its installed version)."""
    try:
        done = subprocess.run(
            [python, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    from stepwise_agent.hostinfo import cpu_model

    parts = (
        platform.node(),
        cpu_model() or "",
        os.path.realpath(python),
        done.stdout.strip(),
        str(os.cpu_count()),
    )
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _cached(key: str) -> dict[str, Any] | None:
    try:
        data = json.loads((cache_dir() / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    if (
        not isinstance(data, dict)
        or data.get("contended")
        or time.time() - float(data.get("measured_unix", 0)) > STALE_AFTER_S
    ):
        return None  # re-measured: stale, or taken on a busy machine
    return data


def _store(key: str, found: dict[str, Any]) -> None:
    try:
        cache_dir().mkdir(parents=True, exist_ok=True)
        tmp = cache_dir() / f".{key}.{os.getpid()}.json"
        tmp.write_text(json.dumps(found))
        os.replace(tmp, cache_dir() / f"{key}.json")
    except OSError:
        pass  # a read-only home: measured again next time, nothing lost


def probe(python: str = sys.executable, timeout_s: float = 60.0) -> dict[str, Any] | None:
    """One measurement in a child process of ``python``: the fp32 peak and the interleaved bf16/fp32 samples,
    summarised (:func:`summarise`); ``None`` when the interpreter has no torch or the probe fails."""
    try:
        done = subprocess.run(
            [python, "-c", _PROBE, str(ROUNDS)], capture_output=True, text=True, timeout=timeout_s
        )
        found = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None
    if not isinstance(found, dict) or not found.get("matmul_tflops", 0) > 0:
        return None
    return {
        **found,
        **summarise(found.get("fp32_rates") or [], found.get("bf16_rates") or []),
        "measured_unix": time.time(),
    }


@functools.lru_cache(maxsize=4)
def measure(python: str = sys.executable, timeout_s: float = 60.0) -> dict[str, Any] | None:
    """This machine's calibration for ``python``'s torch: from the cache when one for this machine and torch
    build is fresh and was not taken on a busy machine, else measured (:func:`probe`) and cached."""
    key = _cache_key(python)
    cached = _cached(key) if key else None
    if cached is not None:
        return {**cached, "cached": True}
    found = probe(python, timeout_s)
    if found is not None and key:
        _store(key, found)
    return found


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
    has = (
        f"CPU flags: {flags}"
        if flags not in (None, "none")
        else "the CPU has neither avx512_bf16 nor amx_bf16"
        if flags == "none"
        else "CPU flags unknown"
    )
    if isinstance(ratio, (int, float)) and ratio > 0:
        size = data.get("bf16_size", 512)
        decision = data.get("bf16_decision")
        spread = data.get("bf16_pair_spread")
        pairs = (
            f", pairs {spread[0]:.2f}–{spread[1]:.2f}×"
            if isinstance(spread, list) and len(spread) == 2
            else ""
        )
        said = f"bf16 matmuls ({size}×{size}) ran at {ratio:.2f}× fp32's rate on this machine{pairs} ({has})"
        if decision == "unclear":
            return (
                False,
                f"{said}: too close to fp32 to be a fix (needs {CLEARLY_APART}× and pairs that agree)",
            )
        if decision in ("faster", "slower"):
            return decision == "faster", said
        return ratio > BF16_SLOW_BELOW, said  # a calibration stored before the decision was
    if flags is None:
        return None, ""
    return flags != "none", has
