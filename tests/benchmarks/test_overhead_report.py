"""``benchmarks/overhead.py``'s verdict logic on fake step timings (no runs, no timing assertions)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "overhead.py"


@pytest.fixture(scope="module")
def overhead():
    spec = importlib.util.spec_from_file_location("stepwise_bench_overhead", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _steps(ms: float, jitter: float, rng: np.random.Generator) -> pd.DataFrame:
    return pd.DataFrame({"rank": 0, "step": range(40), "wall_ms": ms + jitter * rng.standard_normal(40),
                         "samples": 32})


def _rows(overhead, bare_ms: float, inst_ms: float, jitter: float, n: int = 5) -> list[dict]:
    rng = np.random.default_rng(0)
    keep = set(range(3, 40))
    rows = []
    for t in range(n):
        b, i = _steps(bare_ms, jitter, rng), _steps(inst_ms, jitter, rng)
        rows.append({"trial": t + 1, "bare": overhead.throughput(b, keep), "instrumented": overhead.throughput(i, keep),
                     "bare_window": 1.0, "instrumented_window": 1.0,
                     "trials": (overhead.as_trial(b, keep), overhead.as_trial(i, keep))})
    return rows


def test_a_clear_small_overhead_is_met_and_resolved(overhead, capsys) -> None:
    assert overhead.report("fake", _rows(overhead, 40.0, 40.8, jitter=0.2)) is True  # 2% slower, quiet
    out = capsys.readouterr().out
    assert "target ≥ 0.95: met" in out and "not resolved" not in out


def test_a_clear_large_overhead_is_not_met(overhead, capsys) -> None:
    assert overhead.report("fake", _rows(overhead, 40.0, 50.0, jitter=0.2)) is False  # 20% slower
    assert "NOT met" in capsys.readouterr().out


def test_noise_larger_than_the_overhead_is_said(overhead, capsys) -> None:
    overhead.report("fake", _rows(overhead, 40.0, 42.0, jitter=12.0, n=3))  # ±30% per step, 5% overhead
    assert "not resolved" in capsys.readouterr().out


@pytest.mark.slow  # a real measurement: trains compute_bound in 4 blocks in a subprocess (~9 s)
def test_in_process_blocks_alternate_abba_and_sample_telemetry_when_on() -> None:
    """A short real measurement: 4 blocks (ON OFF OFF ON) with the telemetry thread sampling in the ON blocks."""
    import subprocess
    import sys

    import json

    script = BENCH.with_name("overhead_blocks.py")
    out = subprocess.run([sys.executable, str(script), "--workload", "compute_bound", "--size", "tiny",
                          "--blocks", "4", "--json"], check=True, capture_output=True, text=True, timeout=300)
    r = json.loads(out.stdout.strip().splitlines()[-1])[0]
    assert r["blocks"] == 4 and len(r["on_samples_per_s"]) == len(r["off_samples_per_s"]) == 2
    # ≈10 Hz over the steps the ON blocks actually took (not the calibration's estimate: load changes between)
    assert r["on_seconds"] > 0 and r["telemetry_samples"] >= 0.5 * 10 * r["on_seconds"]
    assert r["low"] <= r["ratio"] <= r["high"] and r["ratio"] > 0


def test_blocks_switch_instrumentation_in_abba_order_without_training(tmp_path: Path) -> None:
    """``overhead_blocks.BlockHooks`` driven by hand-made step records (the fast lane's cover of the slow test
    above): blocks of 3 steps in ON OFF OFF ON order, the telemetry thread running in the ON blocks only, each
    step's wall kept in its block and recorded by its arm's recorder."""
    import time

    from profilers.run.trainer import StepRecord

    spec = importlib.util.spec_from_file_location("stepwise_bench_overhead_blocks",
                                                  BENCH.with_name("overhead_blocks.py"))
    blocks_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(blocks_mod)
    hooks = blocks_mod.BlockHooks(tmp_path, first_step=5, block_steps=3, total=17, parts=frozenset({"telemetry"}))
    running = []
    try:
        for step in range(5, 17):
            hooks.before_step(step)
            running.append(hooks.telemetry is not None and hooks.telemetry.is_alive())
            hooks.after_step(StepRecord(step, 10.0 + step, 1.0, 8, time.time_ns()))
    finally:
        hooks.close()
    assert [arm for arm, _ in hooks.blocks] == ["on", "off", "off", "on"]
    assert [walls for _, walls in hooks.blocks] == [[15.0, 16.0, 17.0], [18.0, 19.0, 20.0], [21.0, 22.0, 23.0],
                                                    [24.0, 25.0, 26.0]]
    assert running == [True] * 3 + [False] * 6 + [True] * 3
    assert hooks.telemetry is None and hooks.dog is None  # closed
    rows = {arm: (tmp_path / arm / "steps.jsonl").read_text().count("\n") for arm in ("on", "off")}
    assert rows == {"on": 6, "off": 6}
