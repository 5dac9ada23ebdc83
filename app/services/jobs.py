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
Progress = Callable[
    [Any], None
]  # receives the job's progress values (``advisors.experiments.progress.Progress``)


class BackgroundJob(Generic[T]):
    """``fn(report)`` in a daemon thread; ``report(event)`` records the latest progress event."""

    def __init__(self, name: str, fn: Callable[[Progress], T]) -> None:
        self.name = name
        self.started = time.time()
        self.last: Any = None
        self.events = 0
        self.experiment_id: str | None = None  # the stored experiment it runs, when it runs one
        self.result: T | None = None
        self.error: str | None = None
        self._done = threading.Event()
        self._fn = fn
        self._thread = threading.Thread(target=self._run, name=f"stepwise-{name}", daemon=True)
        self._thread.start()

    def _report(self, event: Any) -> None:
        self.last = (
            event  # one assignment of an immutable value: a reader sees the old or the new one
        )
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
