"""Descendants: the process table is walked at most once per refresh period, and a new child is found then."""

from __future__ import annotations

import subprocess
import sys

import psutil

from profilers.telemetry.proctree import Descendants


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_walks_once_per_refresh_and_finds_a_new_child_at_the_next_walk() -> None:
    clock = Clock()
    tree = Descendants(psutil.Process(), refresh_s=1.0, clock=clock)
    before = {p.pid for p in tree.get()}
    child = _sleeper()
    try:
        for _ in range(50):  # 50 polls inside one period: no new walk, the child is not yet known
            clock.t += 0.01
            assert child.pid not in {p.pid for p in tree.get()}
        assert tree.walks == 1
        clock.t = 1.0
        assert child.pid in {p.pid for p in tree.get()} - before
        assert tree.walks == 2
    finally:
        child.kill()
        child.wait()


def test_a_child_that_exited_between_walks_is_skipped_by_the_memory_sum() -> None:
    clock = Clock()
    me = psutil.Process()
    tree = Descendants(me, clock=clock)
    child = _sleeper()
    try:
        assert child.pid in {p.pid for p in tree.get()}
    finally:
        child.kill()
        child.wait()
    # The cached list still names the reaped child; reading its memory raises NoSuchProcess, which is skipped.
    assert child.pid in {p.pid for p in tree.get()}
    clock.t = 5.0
    assert child.pid not in {p.pid for p in tree.get()}
