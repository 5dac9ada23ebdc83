"""The descendants of a process, found cheaply enough to poll many times a second.

``psutil.Process.children(recursive=True)`` walks every process on the machine (it reads ``/proc/*/stat``):
about 1 ms here with ~70 processes, more on a busy host. The watchdog (20 Hz) and the host telemetry
sampler (10 Hz) both need the training process's children (DataLoader workers, torchrun ranks), and a
millisecond of Python per poll is GIL time taken from the training loop: measured ~3% of one core for the two
threads together, most of the 5% overhead budget. Children change rarely (workers start with an epoch), so
:class:`Descendants` re-walks the table at most every ``refresh_s``; in between it returns the last walk's
list (callers already skip a process that has exited: psutil raises ``NoSuchProcess``). A child started
between walks is seen at the next walk (≤ ``refresh_s`` later; ``with_children_s`` while the last walk found
children).
"""

from __future__ import annotations

import time
from typing import Callable

import psutil

REFRESH_S = 1.0
#: Stepwise's own helper processes (the telemetry sampler's): never the training's, so their CPU and memory are not
#: counted as the run's (a watchdog budget, a run's peak, a trial's CPU) — the profiler's own cost is its own.
OWN_PIDS: set[int] = set()


class Descendants:
    """All descendants of ``root``, re-discovered at most every ``refresh_s`` seconds."""

    def __init__(
        self,
        root: psutil.Process,
        refresh_s: float = REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
        with_children_s: float | None = None,
    ) -> None:
        self.root = root
        self.refresh_s = refresh_s
        # while the last walk found children, walk again this often: workers of short epochs come and go
        self.with_children_s = refresh_s if with_children_s is None else with_children_s
        self._clock = clock
        self._children: list[psutil.Process] = []
        self._walked_at: float | None = None
        self.walks = 0  # how many full process-table walks were made (tests read it)

    def get(self) -> list[psutil.Process]:
        now = self._clock()
        every = self.with_children_s if self._children else self.refresh_s
        if self._walked_at is None or now - self._walked_at >= every:
            self._walked_at = now
            self.walks += 1
            try:
                self._children = [
                    p for p in self.root.children(recursive=True) if p.pid not in OWN_PIDS
                ]
            except psutil.Error:
                self._children = []
        return list(self._children)
