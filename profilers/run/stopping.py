"""Ending Stepwise ends what it started: SIGTERM, SIGHUP (``timeout``, a closed terminal, ``kill``)
and SIGINT stop every run this process has under way, whole process trees included, before the
process ends.

Every :class:`~profilers.run.handle.RunHandle` registers itself here while its run is under way
(:func:`register`). :func:`stop_runs_on_signals` turns SIGTERM and SIGHUP into :class:`Stopped` (a
``KeyboardInterrupt``, so the code that already cancels a run on Ctrl-C does so on these too) and,
on the way out, cancels each run still registered and waits for its watcher to store it: the watcher
signals the run's process group and every descendant it saw, SIGKILLs what outlives the grace, and
sweeps the processes marked with the run's id in their environment (orphans whose parent already
died). Light on purpose: the command line imports it before anything heavy.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from types import FrameType
from typing import Any, Iterator, Protocol

# turned into Stopped; SIGINT is KeyboardInterrupt already
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
# per run: the cancel's grace (SIGTERM, then SIGKILL) and the watcher storing the result
STOP_WAIT_S = 15.0


class _Run(Protocol):
    def cancel(self, reason: str = ...) -> None: ...

    def join(self, timeout: float | None = None) -> bool: ...


class Stopped(KeyboardInterrupt):
    """This process received ``signum`` (SIGTERM, SIGHUP): it stops its runs and ends with 128 +
    signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


_lock = threading.Lock()
_live: dict[int, _Run] = {}


def register(run: _Run) -> None:
    """``run`` is under way: stop it if this process is ended."""
    with _lock:
        _live[id(run)] = run


def unregister(run: _Run) -> None:
    with _lock:
        _live.pop(id(run), None)


def live_runs() -> list[_Run]:
    with _lock:
        return list(_live.values())


def stop_all(reason: str, wait_s: float = STOP_WAIT_S) -> None:
    """Cancel every registered run (their trees get SIGTERM at once) and wait for each to be
    stored."""
    runs = live_runs()
    for run in runs:
        with contextlib.suppress(Exception):
            run.cancel(reason)
    for run in runs:
        with contextlib.suppress(Exception):
            run.join(wait_s)


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signum)


def stop_reason(err: BaseException) -> str:
    """The words a run stopped by ``err`` is stored with."""
    if isinstance(err, Stopped):
        return f"Stepwise was ended by {signal.Signals(err.signum).name}, and stopped the run"
    return "interrupted from the keyboard"


@contextlib.contextmanager
def stop_runs_on_signals() -> Iterator[None]:
    """Inside: SIGTERM and SIGHUP raise :class:`Stopped` in the main thread (a signal this process
    was started with ignored, as under ``nohup``, stays ignored); on the way out, by any path, the
    runs still under way are stopped (:func:`stop_all`). Outside the main thread it only does the
    latter."""
    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, _raise_stopped)
    reason = "Stepwise ended before the run did, and stopped it"
    try:
        yield
    except BaseException as err:
        if isinstance(err, KeyboardInterrupt):
            reason = stop_reason(err)
        raise
    finally:
        # a second signal while the runs are being stopped must not cut the stop short
        held = dict(previous)
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
        ):
            held[signal.SIGINT] = signal.getsignal(signal.SIGINT)
        for sig in held:
            signal.signal(sig, signal.SIG_IGN)
        try:
            stop_all(reason)
        finally:
            for sig, handler in held.items():
                signal.signal(sig, handler)
