"""A fake clock for code that takes ``clock``/``sleep`` callables: time moves only when a test (or the code's own
``sleep``) moves it, so schedules are checked exactly and no test waits for wall time."""

from __future__ import annotations

from typing import Callable

WALL_START_NS = 1_763_900_000_000_000_000  # an ordinary Unix time in ns (late 2025)


class FakeClock:
    """``monotonic()`` in seconds, ``time_ns()`` on the same timeline, and ``sleep(s)`` that only advances both.

    ``on_sleep`` (optional) runs after every sleep, e.g. to stop a loop once the clock passes a deadline.
    ``slept`` records every requested sleep, so a test can check none was negative or skipped."""

    def __init__(self, start_s: float = 100.0) -> None:
        self.start_s = start_s
        self.now = start_s
        self.slept: list[float] = []
        self.on_sleep: Callable[[], None] | None = None

    def monotonic(self) -> float:
        return self.now

    def time_ns(self) -> int:
        return WALL_START_NS + round((self.now - self.start_s) * 1e9)

    def advance(self, seconds: float) -> None:
        assert seconds >= 0, f"time runs forward only ({seconds})"
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)
        if self.on_sleep is not None:
            self.on_sleep()

    def elapsed(self) -> float:
        return self.now - self.start_s
