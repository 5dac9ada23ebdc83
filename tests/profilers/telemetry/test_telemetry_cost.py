"""The host sampler stays cheap: no psutil ``cpu_percent`` (6x the cost of ``cpu_times``), one process-table
walk per refresh period, and its CPU figures still agree with the work done."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from profilers.telemetry.host import HostReader
from tests.fake_clock import FakeClock

BURN_CPU_S = 0.3  # CPU seconds the loop below uses, however long the machine takes to give them


def test_samples_walk_the_process_table_once_per_period_and_never_call_cpu_percent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
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
    lone = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"]
    )  # a root without children
    try:
        reader = HostReader([lone.pid], clock=clock.monotonic)
        per_period = round(HostReader.CHILDREN_REFRESH_S / 0.1)
        for _ in range(
            per_period
        ):  # 10 Hz for one refresh period of the reader's clock, less one tick
            reader.sample()
            clock.advance(0.1)
    finally:
        lone.kill()
        lone.wait()
    assert calls["children"] == 1


def test_process_cpu_follows_the_work_done(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sampler's process CPU equals the CPU this process measured for itself over the same interval.

    Each time the reader reads this process's counters, the test reads its own ``process_time`` with them, and
    the clock reading the reader takes next (its rate's time base) is paired with it: both figures then cover
    exactly the reader's interval, however long a busy machine stretches it. The loop burns a fixed amount of
    CPU time, not of wall time (on a busy 2-core machine a busy loop gets only part of a core, and that is the
    machine, not the sampler)."""
    pending: list[float] = []
    readings: list[
        tuple[float, float]
    ] = []  # (the reader's clock, this process's CPU seconds) per reading
    real_cpu_times = psutil.Process.cpu_times

    def cpu_times(self: psutil.Process) -> object:
        times = real_cpu_times(self)
        if self.pid == os.getpid():
            pending.append(time.process_time())
        return times

    def clock() -> float:
        now = time.monotonic()
        if pending:
            readings.append((now, pending.pop()))
        return now

    monkeypatch.setattr(psutil.Process, "cpu_times", cpu_times)
    reader = HostReader([os.getpid()], clock=clock)
    reader.sample()
    (first,) = readings
    while time.process_time() < first[1] + BURN_CPU_S:
        sum(i * i for i in range(1000))
    row = reader.sample()[0]
    last = readings[1]
    interval = last[0] - first[0]
    sampler_cpu_s, own_cpu_s = row["cpu_pct"] / 100 * interval, last[1] - first[1]
    # psutil's CPU counters move in 10 ms ticks: one tick off at each end, plus cpu_pct's rounding.
    assert abs(sampler_cpu_s - own_cpu_s) <= 0.025, (sampler_cpu_s, own_cpu_s, interval)
    assert own_cpu_s >= BURN_CPU_S  # the loop did run
    assert row["cpu_affinity"] == len(os.sched_getaffinity(0))  # the cores this process may use
    cores = psutil.cpu_count() or 1
    assert 0.0 <= row["system_cpu_pct"] <= 100.0
    # The machine was at least as busy as this process alone (its own readings, a moment apart from ours).
    assert row["system_cpu_pct"] / 100 * cores >= own_cpu_s / interval - 0.1, (
        row,
        own_cpu_s,
        interval,
    )


def test_rates_use_a_window_so_a_late_sample_cannot_spike() -> None:
    """Counters move in 10 ms ticks; two samples 1 ms apart must not turn one tick into 1000%."""
    from profilers.telemetry.host import WindowedRates

    r = WindowedRates(0.25)
    assert r.update("p", 0.0, (0.0,)) is None  # one reading: no rate
    assert r.update("p", 0.01, (0.0,)) is None  # younger than window / 5: still none
    assert r.update("p", 0.10, (0.10,)) == pytest.approx(
        (1.0,)
    )  # 0.1 s of CPU over 0.1 s: one core
    late, early = r.update("p", 0.30, (0.29,)), r.update("p", 0.301, (0.30,))
    assert late == pytest.approx(
        (0.29 / 0.29,)
    )  # against the newest reading ≥ 0.25 s old (t = 0.01)
    assert early == pytest.approx((0.30 / 0.291,))  # the same base, not the reading 1 ms before
    r.forget_all_but(set())
    assert r.update("p", 1.0, (1.0,)) is None  # forgotten: starts again
