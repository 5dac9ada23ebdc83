"""Host telemetry of a training process tree: CPU, memory and storage I/O of the roots and all their
descendants (DataLoader workers, torchrun's local ranks), the sampler's own CPU, and the machine's busy share.
:class:`HostReader` is what :class:`~profilers.telemetry.sampler.TelemetrySampler` samples when NVML is absent,
and beside it on a GPU run."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Callable, Iterable

import psutil

from profilers.telemetry.proctree import Descendants

__all__ = ["MB", "HostReader", "WindowedRates"]

MB = 1024 * 1024
REAPED = "reaped"  # the rate key of exited children's CPU (see HostReader)
MONITOR = "monitor"  # the rate key of the sampling process's own CPU


class HostReader:
    """psutil metrics for a set of root processes and all their descendants.

    Cheap by design (it ran as a thread sharing the GIL with the training loop; a run's sampler now has a process
    of its own, ``profilers.telemetry.process``, but a launcher's still shares its process): CPU percentages are
    differences of ``cpu_times()`` kept here (psutil's ``cpu_percent`` costs ~6× more per call: 0.32 vs 0.05
    ms measured), and the process table is re-walked for new children at most every ``CHILDREN_REFRESH_S``.
    Measured per sample (thread CPU time, 10 Hz, next to a decoding loop): 0.68 ms before, 0.56 ms now — most
    of what is left is the cold start of a thread that slept 100 ms (whichever call comes first pays ~0.2 ms),
    so ~0.6% of one core. ``tests/profilers/telemetry/test_telemetry_cost.py`` holds the two choices in place.

    Rates (CPU %, I/O MB/s) are taken over at least ``RATE_WINDOW_S`` of each process's own readings, not
    between consecutive samples: the kernel counts CPU time in 10 ms ticks, and a sample that runs late lets
    the next one follow a few ms after it, so one tick over 0.6 ms read as 1729% on 2 cores (measured, with
    DataLoader workers). Over ≥ 0.25 s a tick is ≤ 4% of a core.

    A child that exits is counted to its last CPU tick: once its parent waits for it, the parent's
    ``children_user``/``children_system`` hold its whole CPU time, and what its own rate had not counted yet (it
    exited since the last sample, or between two walks of the table and was never seen) is added then. Without
    it, the DataLoader workers of a 12-step run, which finish their epoch's batches in a second and exit, read as
    1.2–1.5 of 2 cores taken by other programs, and the README's own ``optimize`` called every trial with four
    workers contended (measured).

    ``clock`` (default ``time.monotonic``) times those windows and the children refresh; tests pass a fake one.
    """

    CHILDREN_REFRESH_S = (
        0.5  # the sampler runs outside the training process (the launcher's, or one of its own):
    )
    # a walk takes 1.3 ms with 62 processes (measured), 0.26% of a core at this rate
    WITH_CHILDREN_REFRESH_S = (
        0.1  # while the tree has children: a tiny run's DataLoader workers live ~0.2 s
    )
    # each (an epoch of a few batches, then new workers); a worker never seen is counted when it is reaped
    USS_REFRESH_S = 1.0  # a child's USS reads its smaps: 3 ms for a process that imported torch (measured), so four
    # workers read every sample took 0.2-0.35 of a core from the run they watched; memory moves slower than that
    RATE_WINDOW_S = 0.25

    def __init__(
        self, root_pids: Iterable[int], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self._roots = [psutil.Process(pid) for pid in root_pids]
        self._descendants = [
            Descendants(root, self.CHILDREN_REFRESH_S, clock, self.WITH_CHILDREN_REFRESH_S)
            for root in self._roots
        ]
        self._rates = WindowedRates(self.RATE_WINDOW_S)
        self._cpu_count = psutil.cpu_count() or None
        self._affinity = _affinity(self._roots[0]) if self._roots else None
        self._counted: dict[
            int, float
        ] = {}  # each live child's CPU seconds so far, as its own rate counted them
        self._seen_of_reaped = (
            0.0  # of exited children's CPU, what their own rates counted while they lived
        )
        self._uss: dict[int, tuple[float, float]] = {}  # a child's USS (bytes) and when it was read
        self._me = (
            psutil.Process()
        )  # the sampler's own process: its CPU is Stepwise's, not another program's

    def _tree(self) -> list[tuple[psutil.Process, bool]]:
        out: list[tuple[psutil.Process, bool]] = []
        for root, descendants in zip(self._roots, self._descendants):
            out.append((root, True))
            out.extend((child, False) for child in descendants.get())
        return out

    def sample(self) -> list[dict[str, Any]]:
        cpu = rss = read = write = 0.0
        reaped = 0.0  # CPU seconds of exited children, counted into their parent's times when it waited for them
        alive: set[Any] = {"system", REAPED}
        for proc, is_root in self._tree():
            try:
                times = proc.cpu_times()
                at = self._clock()  # each process's counters against its own clock reading
            except (psutil.Error, AttributeError):
                continue
            alive.add(proc.pid)
            own = times.user + times.system
            reaped += getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0)
            if not is_root:
                self._counted[proc.pid] = own
            io = _io(proc)
            with contextlib.suppress(
                psutil.Error, AttributeError
            ):  # a zombie (exited, not yet waited for)
                rss += proc.memory_info().rss if is_root else self._child_uss(proc, at)
            if not is_root and not self._rates.knows(proc.pid):
                self._seed_from_birth(proc, at)
            rates = self._rates.update(proc.pid, at, (own, *io))
            if rates is not None:
                cpu, read, write = cpu + 100.0 * rates[0], read + rates[1], write + rates[2]
        for pid in (
            set(self._counted) - alive
        ):  # exited and waited for: its parent's times now hold all of it
            self._seen_of_reaped += self._counted.pop(pid)
        late = self._rates.update(REAPED, self._clock(), (reaped - self._seen_of_reaped, 0.0, 0.0))
        if late is not None:
            cpu += 100.0 * late[0]
        me = self._own_cpu()
        busy, total = _busy_total(psutil.cpu_times())
        system = self._rates.update("system", self._clock(), (busy, total))
        self._rates.forget_all_but(alive | {MONITOR})  # processes that exited
        self._uss = {pid: v for pid, v in self._uss.items() if pid in alive}
        system_pct = 100.0 * system[0] / system[1] if system is not None and system[1] > 0 else None
        return [
            {
                "cpu_pct": round(cpu, 1),
                "monitor_cpu_pct": None if me is None else round(me, 1),
                "system_cpu_pct": None
                if system_pct is None
                else round(min(max(system_pct, 0.0), 100.0), 1),
                "cpu_count": self._cpu_count,
                "cpu_affinity": self._affinity,
                "rss_mb": round(rss / MB, 1),
                "read_mb_s": round(read / MB, 3),
                "write_mb_s": round(write / MB, 3),
            }
        ]

    def _child_uss(self, proc: psutil.Process, at: float) -> float:
        """The child's USS, read again at most every ``USS_REFRESH_S``."""
        known = self._uss.get(proc.pid)
        if known is None or at - known[1] >= self.USS_REFRESH_S:
            known = (float(proc.memory_full_info().uss), at)
            self._uss[proc.pid] = known
        return known[0]

    def _own_cpu(self) -> float | None:
        """The CPU (100 = one core) of the process this sampler runs in, unless it is one of the roots (a sampler
        thread inside the training process): the launcher's sampling, progress and watchdog are Stepwise's cost."""
        if self._me.pid in {r.pid for r in self._roots}:
            return None
        try:
            t = self._me.cpu_times()
        except psutil.Error:
            return None
        rate = self._rates.update(MONITOR, self._clock(), (t.user + t.system, 0.0, 0.0))
        return None if rate is None else 100.0 * rate[0]

    def _seed_from_birth(self, proc: psutil.Process, at: float) -> None:
        """A child seen for the first time (a DataLoader worker, found at the next walk of the process table)
        started with zero counters when it was born: its first rate is its mean since then, not nothing. Without
        this, workers' CPU in an A/B trial of a few hundred ms read as other programs' (measured on an H100 box:
        0.4–1.8 of 16 cores "others" in every num_workers=8 trial, so real gains were judged contended)."""
        age = _age_s(proc)
        if age is not None and age > 0:
            self._rates.seed(proc.pid, at - age, (0.0, 0.0, 0.0))


def _age_s(proc: psutil.Process) -> float | None:
    """Seconds since ``proc`` started. On Linux from its start in clock ticks since boot against ``/proc/uptime``:
    psutil's ``create_time()`` adds the boot time, which the kernel gives in whole seconds, so a worker 0.15 s old
    read as up to a second old and its CPU since birth as a seventh of what it was (measured)."""
    try:
        with open(f"/proc/{proc.pid}/stat", "rb") as fh:
            started = int(
                fh.read().rsplit(b")", 1)[1].split()[19]
            )  # field 22, starttime, after "pid (comm)"
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        return uptime - started / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        pass
    try:
        return time.time() - proc.create_time()
    except (psutil.Error, OSError):
        return None


def _io(proc: psutil.Process) -> tuple[float, float]:
    """Bytes ``proc`` read from and wrote to storage; zeros where they cannot be read (a zombie's)."""
    try:
        io = proc.io_counters()
    except (psutil.Error, AttributeError):
        return 0.0, 0.0
    return float(io.read_bytes), float(io.write_bytes)


def _affinity(proc: psutil.Process) -> int | None:
    """How many cores ``proc`` may run on (its CPU affinity), or ``None`` where the platform does not say."""
    try:
        return len(proc.cpu_affinity()) or None
    except (psutil.Error, AttributeError, OSError):
        return None


class WindowedRates:
    """Per-second rates of monotonic counters, each over at least ``window_s`` of that key's own readings.

    ``update(key, at, counters)`` stores the reading and returns ``(Δc / Δt, ...)`` against the newest earlier
    reading that is at least ``window_s`` old — or, while the key is younger than that, against its oldest
    reading once that is at least ``window_s / 5`` old; ``None`` before (a first reading has no rate).
    """

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._history: dict[Any, list[tuple[float, tuple[float, ...]]]] = {}

    def update(self, key: Any, at: float, counters: tuple[float, ...]) -> tuple[float, ...] | None:
        history = self._history.setdefault(key, [])
        old = [h for h in history if at - h[0] >= self.window_s]
        base = (
            old[-1]
            if old
            else (history[0] if history and at - history[0][0] >= self.window_s / 5 else None)
        )
        history.append((at, counters))
        if old:  # readings older than the base are no longer needed
            del history[: len(old) - 1]
        if base is None:
            return None
        dt = at - base[0]
        return tuple(max(c - b, 0.0) / dt for c, b in zip(counters, base[1]))

    def knows(self, key: Any) -> bool:
        return key in self._history

    def seed(self, key: Any, at: float, counters: tuple[float, ...]) -> None:
        """A reading ``key`` is known to have had at ``at`` (before any real one): its counters at birth."""
        self._history.setdefault(key, []).insert(0, (at, counters))

    def forget_all_but(self, keys: set[Any]) -> None:
        for key in set(self._history) - keys:
            del self._history[key]


def _busy_total(t: Any) -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine from ``psutil.cpu_times()``: idle and iowait are not busy;
    guest time is already inside user time on Linux, so it is not added twice."""
    total = sum(getattr(t, f) for f in t._fields if f not in ("guest", "guest_nice"))
    idle = t.idle + getattr(t, "iowait", 0.0)
    return total - idle, total
