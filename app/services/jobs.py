"""Long work started from a page (an A/B experiment, an optimisation ladder) runs in a background thread.

A :class:`BackgroundJob` belongs to the session that started it (kept in its session state, see
:mod:`app.state`); a fragment polls ``last``/``done``. The runs it starts are stored runs like any other, so
nothing is lost if the session goes away: the thread finishes, the store keeps every trial.
"""

from __future__ import annotations

import threading
import time
import traceback
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")
Progress = Callable[[dict[str, Any]], None]


class BackgroundJob(Generic[T]):
    """``fn(report)`` in a daemon thread; ``report(event)`` records the latest progress event."""

    def __init__(self, name: str, fn: Callable[[Progress], T]) -> None:
        self.name = name
        self.started = time.time()
        self.last: dict[str, Any] = {}
        self.events = 0
        self.result: T | None = None
        self.error: str | None = None
        self._done = threading.Event()
        self._fn = fn
        self._thread = threading.Thread(target=self._run, name=f"stepwise-{name}", daemon=True)
        self._thread.start()

    def _report(self, event: dict[str, Any]) -> None:
        self.last = dict(event)  # one assignment: a reader sees the old or the new event, never half of one
        self.events += 1

    def _run(self) -> None:
        try:
            self.result = self._fn(self._report)
        except Exception as err:  # the page shows it; the thread must not die silently
            self.error = f"{type(err).__name__}: {err}"
            self.trace = traceback.format_exc()
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    @property
    def elapsed_s(self) -> float:
        return time.time() - self.started
