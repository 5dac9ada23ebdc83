"""The host sampler stays cheap: no psutil ``cpu_percent`` (6x the cost of ``cpu_times``), one process-table
walk per refresh period, and its CPU figures still agree with the work done."""

from __future__ import annotations

import os
import time

import psutil
import pytest

from profilers.telemetry.sampler import HostReader
from tests.fake_clock import FakeClock


def test_samples_walk_the_process_table_once_per_period_and_never_call_cpu_percent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"children": 0}
    real_children = psutil.Process.children

    def counting_children(self: psutil.Process, recursive: bool = False) -> list[psutil.Process]:
        calls["children"] += 1
        return real_children(self, recursive=recursive)

    def forbidden(*_: object, **__: object) -> float:
        raise AssertionError("cpu_percent is too costly for a 10 Hz sampler")

    monkeypatch.setattr(psutil.Process, "children", counting_children)
    monkeypatch.setattr(psutil.Process, "cpu_percent", forbidden)
    monkeypatch.setattr(psutil, "cpu_percent", forbidden)
    clock = FakeClock()
    reader = HostReader([os.getpid()], clock=clock.monotonic)
    for _ in range(20):  # 10 Hz for 1.9 s of the reader's clock: all inside one refresh period
        reader.sample()
        clock.advance(0.1)
    assert calls["children"] == 1


def test_process_cpu_follows_the_work_done() -> None:
    """The sampler's process CPU % equals the CPU this process measured for itself over the same interval.

    Compared with the process's own ``process_time`` rather than a fixed ≈100: on a busy 2-core machine a
    busy loop gets only part of a core, and that is the machine, not the sampler."""
    reader = HostReader([os.getpid()])
    reader.sample()
    c0, w0 = time.process_time(), time.monotonic()
    end = time.perf_counter() + 0.3
    while time.perf_counter() < end:  # one core busy, as far as the machine allows
        sum(i * i for i in range(1000))
    c1, w1 = time.process_time(), time.monotonic()
    row = reader.sample()[0]
    own = 100.0 * (c1 - c0) / (w1 - w0)
    # CPU time moves in 10 ms ticks: ±3.3 points over 0.3 s on each reading, so 12 points is loose.
    assert abs(row["cpu_pct"] - own) <= 12.0, (row["cpu_pct"], own)
    assert row["cpu_pct"] >= 20.0  # the loop did run
    assert 0.0 <= row["system_cpu_pct"] <= 100.0
    assert row["system_cpu_pct"] >= 100.0 / (psutil.cpu_count() or 1) * 0.5


def test_rates_use_a_window_so_a_late_sample_cannot_spike() -> None:
    """Counters move in 10 ms ticks; two samples 1 ms apart must not turn one tick into 1000%."""
    from profilers.telemetry.sampler import WindowedRates

    r = WindowedRates(0.25)
    assert r.update("p", 0.0, (0.0,)) is None  # one reading: no rate
    assert r.update("p", 0.01, (0.0,)) is None  # younger than window / 5: still none
    assert r.update("p", 0.10, (0.10,)) == pytest.approx((1.0,))  # 0.1 s of CPU over 0.1 s: one core
    late, early = r.update("p", 0.30, (0.29,)), r.update("p", 0.301, (0.30,))
    assert late == pytest.approx((0.29 / 0.29,))  # against the newest reading ≥ 0.25 s old (t = 0.01)
    assert early == pytest.approx((0.30 / 0.291,))  # the same base, not the reading 1 ms before
    r.forget_all_but(set())
    assert r.update("p", 1.0, (1.0,)) is None  # forgotten: starts again
