"""The sampler's schedule on a fake clock: a fixed grid whatever a sample costs, catch-up after a stall, a sample
that raises does not end the loop, lines stamped with the injected wall clock, a children walk per refresh.

The same properties in real time (a 10 Hz thread against a bare control thread, ~4 s) are in
``test_telemetry_rate.py``, marked slow."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from profilers.telemetry.sampler import HostReader, TelemetrySampler, kineto_base_ns, read_telemetry
from tests.fake_clock import FakeClock

INTERVAL_S = 0.1


class CostlyReader:
    """Stands in for the host reader: each sample takes ``costs[i]`` seconds of fake time (last value repeats),
    and sample number ``raise_at`` (0-based) raises like a psutil hiccup."""

    def __init__(self, clock: FakeClock, costs: list[float], raise_at: int | None = None) -> None:
        self.clock, self.costs, self.raise_at, self.calls = clock, costs, raise_at, 0

    def sample(self) -> list[dict[str, Any]]:
        i, self.calls = self.calls, self.calls + 1
        self.clock.advance(self.costs[min(i, len(self.costs) - 1)])
        if i == self.raise_at:
            raise OSError("psutil hiccup")
        return [{"cpu_pct": float(i)}]


def run_for(
    tmp_path: Path,
    seconds: float,
    costs: list[float],
    raise_at: int | None = None,
    interval_s: float = INTERVAL_S,
) -> tuple[FakeClock, list[float]]:
    """Runs the sampler loop in this thread on a fake clock until ``seconds`` have passed; returns the clock and
    each line's time in seconds since the start (from its ``t_unix_ns``)."""
    clock = FakeClock()
    sampler = TelemetrySampler(
        tmp_path / "t.jsonl",
        interval_s=interval_s,
        source="host",
        clock=clock.monotonic,
        wall_ns=clock.time_ns,
        sleep=clock.sleep,
    )
    sampler.reader = CostlyReader(clock, costs, raise_at)  # type: ignore[assignment]
    clock.on_sleep = lambda: sampler.stop() if clock.elapsed() >= seconds - 1e-9 else None
    sampler.run()
    df = read_telemetry(tmp_path / "t.jsonl")
    start_ns = clock.time_ns() - round(clock.elapsed() * 1e9)
    return clock, [(t - start_ns) / 1e9 for t in df["t_unix_ns"]]


def test_samples_sit_on_a_fixed_grid_whatever_a_sample_costs(tmp_path: Path) -> None:
    """30 ms per sample at 10 Hz: still one sample every 100 ms (a sleep of the interval after each sample
    would drift to one per 130 ms: 12 in 1.5 s instead of 15)."""
    clock, times = run_for(tmp_path, 1.5, costs=[0.03])
    assert times == pytest.approx([round(k * INTERVAL_S, 6) for k in range(15)], abs=1e-6)
    assert clock.slept == pytest.approx([INTERVAL_S - 0.03] * 15)


def test_a_stalled_sample_skips_the_slots_it_missed_instead_of_a_burst(tmp_path: Path) -> None:
    """Sample 2 stalls 350 ms: the next sample follows at once, then the grid resumes from there. The three
    slots the stall overran are not sampled back to back (rows at one moment say nothing more; on an H100 a
    CUDA-graph capture held a sampler 3 s and a burst after it hid the gap)."""
    clock, times = run_for(tmp_path, 1.5, costs=[0.01, 0.01, 0.35, 0.01])
    assert times[:3] == pytest.approx([0.0, 0.1, 0.2], abs=1e-6)
    assert times[3] == pytest.approx(0.55, abs=1e-6)  # at once after the stall
    assert times[4:] == pytest.approx(
        [round(0.65 + 0.1 * k, 6) for k in range(9)], abs=1e-6
    )  # a fresh grid
    assert len(times) == 13
    assert all(
        b - a >= 0.1 - 1e-6 for a, b in zip(times[3:], times[4:])
    )  # never two rows closer than the grid
    assert all(s >= 0 for s in clock.slept)


def test_a_sample_that_raises_costs_one_line_not_the_run(tmp_path: Path) -> None:
    _, times = run_for(tmp_path, 1.0, costs=[0.0], raise_at=3)
    df = read_telemetry(tmp_path / "t.jsonl")
    assert df["cpu_pct"].tolist() == [
        0.0,
        1.0,
        2.0,
        4.0,
        5.0,
        6.0,
        7.0,
        8.0,
        9.0,
    ]  # sample 3 raised
    assert times == pytest.approx([0.0, 0.1, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], abs=1e-6)


def test_lines_carry_the_injected_wall_clock_on_the_trace_clock(tmp_path: Path) -> None:
    clock, _ = run_for(tmp_path, 0.3, costs=[0.0])
    df = read_telemetry(tmp_path / "t.jsonl")
    assert df["t_unix_ns"].iloc[0] == clock.time_ns() - round(0.3 * 1e9)
    for t_ns, t_us in zip(df["t_unix_ns"], df["t_trace_us"]):
        assert t_us == (t_ns - kineto_base_ns(t_ns)) / 1000


def test_the_host_reader_walks_the_process_table_once_per_refresh_on_its_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    walks = {"n": 0}
    real_children = psutil.Process.children

    def counting_children(self: psutil.Process, recursive: bool = False) -> list[psutil.Process]:
        walks["n"] += 1
        return real_children(self, recursive=recursive)

    monkeypatch.setattr(psutil.Process, "children", counting_children)
    import subprocess
    import sys

    lone = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"]
    )  # a root without children
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        for root, every in (
            (lone, HostReader.CHILDREN_REFRESH_S),
            (parent, HostReader.WITH_CHILDREN_REFRESH_S),
        ):
            walks["n"] = 0
            clock = FakeClock()
            reader = HostReader([root.pid], clock=clock.monotonic)
            for _ in range(
                3
            ):  # samples a quarter of the period apart, all inside one refresh period
                reader.sample()
                clock.advance(every / 4)
            reader.sample()
            assert walks["n"] == 1, root.args
            clock.advance(every)
            reader.sample()
            assert walks["n"] == 2, root.args
    finally:
        for p in (lone, parent):
            p.kill()
            p.wait()


def test_process_cpu_is_real_cpu_time_over_the_injected_clock() -> None:
    """No rate from one reading; then the CPU this process really used, over the time the fake clock moved."""
    clock = FakeClock()
    reader = HostReader([os.getpid()], clock=clock.monotonic)
    assert reader.sample()[0]["cpu_pct"] == 0.0
    c0 = time.process_time()
    while (
        time.process_time() < c0 + 0.1
    ):  # 0.1 s of real CPU work, however long a busy machine takes to give it
        sum(i * i for i in range(1000))
    c1 = time.process_time()
    clock.advance(
        0.5
    )  # the counters moved over 0.1 s of real time, the rate is taken over 0.5 s of clock
    row = reader.sample()[0]
    # The reader's counters move in 10 ms ticks (2 points over 0.5 s each): two readings, plus the reader's own
    # bookkeeping between them, stay within 6 points; a rate over the real 0.1 s would read 5 times higher.
    assert row["cpu_pct"] == pytest.approx(100.0 * (c1 - c0) / 0.5, abs=6.0)
    assert row["cpu_pct"] > 0.0


def test_a_child_found_late_counts_its_cpu_since_birth_not_as_other_programs() -> None:
    """A DataLoader worker born between two walks of the process table: at the walk that finds it, its CPU so
    far counts as ours at once (its rate since birth), where it used to read as none until a second reading."""
    import subprocess
    import sys
    import time

    reader = HostReader([os.getpid()])
    reader.sample()  # the first walk: no child yet
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 5: pass",
        ]
    )
    try:
        deadline = time.monotonic() + 10
        while child.poll() is None and time.monotonic() < deadline:
            if psutil.Process(child.pid).cpu_times().user > 0.3:
                break
            time.sleep(0.05)
        time.sleep(HostReader.CHILDREN_REFRESH_S)  # the next sample walks the table again
        first_with_child = reader.sample()[0]["cpu_pct"]
        born = psutil.Process(child.pid)
        used = born.cpu_times()
        share = 100.0 * (used.user + used.system) / max(time.time() - born.create_time(), 1e-3)
    finally:
        child.kill()
        child.wait()
    # the busy child's share of a core since it began, not 0 — read against what it really got: on a machine other
    # programs keep busy a spinning child may get well under a fifth of a core
    assert share > 0 and first_with_child >= 0.5 * share, (first_with_child, share)


def test_a_child_that_exits_between_samples_counts_as_ours_once() -> None:
    """A DataLoader worker of a short epoch can be born, work and exit between two walks of the process table:
    once waited for, its CPU is in its parent's ``children_*`` times, and the reader counts it there, once."""
    import subprocess
    import sys
    import time

    reader = HostReader([os.getpid()])
    reader.sample()
    t0, before = time.monotonic(), psutil.Process().cpu_times()
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass",
        ],
        check=True,
    )  # waited for: reaped
    row = reader.sample()[0]
    t1, after = time.monotonic(), psutil.Process().cpu_times()
    used = (after.user + after.system + after.children_user + after.children_system) - (
        before.user + before.system + before.children_user + before.children_system
    )
    assert used >= 0.4
    assert row["cpu_pct"] / 100.0 * (t1 - t0) == pytest.approx(used, rel=0.25), (row, used, t1 - t0)
    time.sleep(HostReader.RATE_WINDOW_S * 1.5)
    assert reader.sample()[0]["cpu_pct"] < 30.0  # counted once: the next window holds none of it


def test_a_childs_age_comes_from_its_start_in_ticks_not_a_whole_second_boot_time() -> None:
    import subprocess
    import sys
    import time

    from profilers.telemetry.host import _age_s

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    started = time.monotonic()
    try:
        time.sleep(0.2)
        age = _age_s(psutil.Process(child.pid))
        assert age is not None and abs(age - (time.monotonic() - started)) < 0.06, age
    finally:
        child.kill()
        child.wait()
