"""Device telemetry at ≥ 10 Hz: NVML (``nvidia-ml-py``) when it works, psutil host metrics when it does not.

``TelemetrySampler`` is a daemon thread that appends one JSON line per sample (per GPU for NVML) to
``telemetry.jsonl`` and flushes it, so a reader sees samples live and a killed run keeps what it sampled.
With NVML it writes the host's line too (``source: "host"``, same ``t_unix_ns``): a GPU run's input pipeline
lives on the host's cores, and the advisor needs to know whether they were saturated.

Clock alignment: every line carries ``t_unix_ns`` (``time.time_ns()``) and ``t_trace_us``, the same clock as
the Kineto trace's ``ts``. Kineto (torch ≥ 2.4) writes ``ts`` in µs relative to ``baseTimeNanoseconds`` in the
trace header, which it computes as wall-clock time floored to a 7,889,238-second ("trimonth") boundary
(see ``torch/profiler/_chrome_trace_export.py``); :func:`kineto_base_ns` reproduces it and
``tests/profilers/telemetry/test_telemetry.py`` checks it against a real trace.

Host metrics cover the training process and its DataLoader children (and, under torchrun, the other local
ranks): ``cpu_pct`` (100 = one core), ``rss_mb`` (RSS of the roots + USS of their children), ``read_mb_s``,
``write_mb_s`` (storage I/O of those processes); ``monitor_cpu_pct``, the sampling process's own CPU (the
launcher's, when the sampler is not inside the training process); and for the machine as a whole ``system_cpu_pct`` (0–100, all
cores) and ``cpu_count`` (logical cores), so the advisor can tell a saturated host from an idle one.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import orjson
import pandas as pd
import psutil

from profilers.telemetry.proctree import Descendants

__all__ = ["FakeNvml", "TelemetrySampler", "kineto_base_ns", "probe_nvml", "read_telemetry"]

REAPED = "reaped"  # the rate key of exited children's CPU (see HostReader)
MONITOR = "monitor"  # the rate key of the sampling process's own CPU
KINETO_BASE_PERIOD_S = 7_889_238  # libkineto's ChromeTraceBaseTime granularity
MB = 1024 * 1024


def kineto_base_ns(t_unix_ns: int | None = None) -> int:
    """Kineto's ``baseTimeNanoseconds`` for a trace recorded at ``t_unix_ns`` (default: now)."""
    seconds = (time.time_ns() if t_unix_ns is None else t_unix_ns) // 1_000_000_000
    return (seconds // KINETO_BASE_PERIOD_S) * KINETO_BASE_PERIOD_S * 1_000_000_000


def probe_nvml(nvml: Any = None) -> tuple[bool, str]:
    """``(available, reason)``: can NVML be initialised and does it see a GPU? Never raises."""
    try:
        if nvml is None:
            import pynvml  # nvidia-ml-py

            nvml = pynvml
        nvml.nvmlInit()
        try:
            count = int(nvml.nvmlDeviceGetCount())
        finally:
            nvml.nvmlShutdown()
    except Exception as err:  # ImportError, NVMLError_LibraryNotFound, driver errors...
        return False, f"{type(err).__name__}: {err}".strip().rstrip(":")
    if count < 1:
        return False, "NVML found no GPU"
    return True, f"NVML sees {count} GPU(s)"


class NvmlReader:
    """Per-GPU metrics through the pynvml API; a metric the GPU does not support is ``None``, not an error."""

    def __init__(self, nvml: Any = None) -> None:
        if nvml is None:
            import pynvml

            nvml = pynvml
        self._nvml = nvml
        nvml.nvmlInit()
        self._handles = [
            nvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(nvml.nvmlDeviceGetCount()))
        ]

    def _try(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:
            return None

    def sample(self) -> list[dict[str, Any]]:
        n = self._nvml
        rows = []
        for index, h in enumerate(self._handles):
            util = self._try(n.nvmlDeviceGetUtilizationRates, h)
            mem = self._try(n.nvmlDeviceGetMemoryInfo, h)
            power = self._try(n.nvmlDeviceGetPowerUsage, h)  # milliwatts
            rows.append(
                {
                    "gpu": index,
                    "gpu_util_pct": None if util is None else float(util.gpu),
                    "mem_used_mb": None if mem is None else round(mem.used / MB, 1),
                    "mem_total_mb": None if mem is None else round(mem.total / MB, 1),
                    "power_w": None if power is None else power / 1000.0,
                    "sm_clock_mhz": self._try(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM),
                    "temp_c": self._try(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
                    "pcie_tx_kbps": self._try(
                        n.nvmlDeviceGetPcieThroughput, h, n.NVML_PCIE_UTIL_TX_BYTES
                    ),
                    "pcie_rx_kbps": self._try(
                        n.nvmlDeviceGetPcieThroughput, h, n.NVML_PCIE_UTIL_RX_BYTES
                    ),
                }
            )
        return rows

    def close(self) -> None:
        self._try(self._nvml.nvmlShutdown)


class FakeNvml:
    """A stand-in for the ``pynvml`` module with ``gpus`` fake GPUs, so the NVML path runs in CI.

    Values are deterministic functions of the call count; ``fail_init`` makes ``nvmlInit`` raise like a machine
    without a driver, ``unsupported`` names API functions that raise (e.g. power on some boards).
    """

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1

    class NVMLError(Exception):
        pass

    def __init__(
        self, gpus: int = 2, fail_init: bool = False, unsupported: tuple[str, ...] = ()
    ) -> None:
        self.gpus, self.fail_init, self.unsupported = gpus, fail_init, set(unsupported)
        self.calls: dict[str, int] = {}

    def _call(self, name: str) -> int:
        if name in self.unsupported:
            raise FakeNvml.NVMLError(f"{name}: Not Supported")
        self.calls[name] = self.calls.get(name, 0) + 1
        return self.calls[name]

    def nvmlInit(self) -> None:
        self._call("nvmlInit")
        if self.fail_init:
            raise FakeNvml.NVMLError("Driver Not Loaded")

    def nvmlShutdown(self) -> None:
        self._call("nvmlShutdown")

    def nvmlDeviceGetCount(self) -> int:
        self._call("nvmlDeviceGetCount")
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._call("nvmlDeviceGetHandleByIndex")
        return index

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        n = self._call("nvmlDeviceGetUtilizationRates")
        return type("Util", (), {"gpu": (10 * n + h) % 101, "memory": 5})()

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        n = self._call("nvmlDeviceGetMemoryInfo")
        return type(
            "Mem", (), {"used": (1000 + n) * MB, "total": 16000 * MB, "free": (15000 - n) * MB}
        )()

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return 100_000 + self._call("nvmlDeviceGetPowerUsage")  # milliwatts

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        self._call("nvmlDeviceGetClockInfo")
        return 1410

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        self._call("nvmlDeviceGetTemperature")
        return 60 + h

    def nvmlDeviceGetPcieThroughput(self, h: int, counter: int) -> int:
        self._call("nvmlDeviceGetPcieThroughput")
        return 2000 if counter == self.NVML_PCIE_UTIL_TX_BYTES else 3000


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


class TelemetrySampler(threading.Thread):
    """Samples every ``interval_s`` into ``out_path`` (JSON lines) until :meth:`stop`.

    ``source``: ``None`` picks NVML when :func:`probe_nvml` succeeds, else host; ``"nvml"``/``"host"`` force
    one; an NVML-like object (e.g. :class:`FakeNvml`) is used as the pynvml module. ``note`` says what was
    chosen and why (it goes into the run result). ``root_pids`` are the processes whose host metrics count.

    Time is injectable, so the schedule can be tested without waiting for it: ``clock`` (monotonic seconds)
    keeps the sampling grid and the host reader's rate windows, ``wall_ns`` stamps each line (``t_unix_ns``,
    and through it ``t_trace_us``), and ``sleep(seconds)`` waits between samples — by default on the stop
    event, so :meth:`stop` wakes it at once. A fake ``sleep`` advances a fake ``clock`` and may call
    :meth:`stop`; :meth:`run` can then be called in the test's own thread.
    """

    def __init__(
        self,
        out_path: os.PathLike[str] | str,
        interval_s: float = 0.1,
        source: Any = None,
        root_pids: Iterable[int] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_ns: Callable[[], int] = time.time_ns,
        sleep: Callable[[float], Any] | None = None,
    ) -> None:
        super().__init__(name="stepwise-telemetry", daemon=True)
        self.out_path = Path(out_path)
        self.interval_s = interval_s
        self._stop_event = threading.Event()
        self._clock, self._wall_ns = clock, wall_ns
        self._sleep: Callable[[float], Any] = self._stop_event.wait if sleep is None else sleep
        self._roots = list(root_pids) if root_pids is not None else [os.getpid()]
        self.reader: NvmlReader | HostReader
        self.host: HostReader | None = (
            None  # beside NVML: the host's side of a GPU run (its CPUs feed the GPU)
        )
        if source is None or source == "nvml":
            ok, reason = probe_nvml()  # probes the real pynvml
            if ok:
                self.source, self.reader, self.note = "nvml", NvmlReader(), reason
            elif source == "nvml":
                raise RuntimeError(f"NVML telemetry requested but unavailable: {reason}")
            else:
                self.source, self.reader = "host", HostReader(self._roots, clock)
                self.note = f"NVML unavailable: {reason}; host telemetry via psutil"
        elif source == "host":
            self.source, self.reader, self.note = (
                "host",
                HostReader(self._roots, clock),
                "host telemetry via psutil",
            )
        else:
            ok, reason = probe_nvml(source)
            if not ok:
                raise RuntimeError(f"NVML telemetry requested but unavailable: {reason}")
            self.source, self.reader, self.note = (
                "nvml",
                NvmlReader(source),
                f"{reason} (injected NVML module)",
            )
        if self.source == "nvml":
            self.host = HostReader(self._roots, clock)
            self.note += "; host CPU and memory via psutil alongside"
        self.samples_written = 0
        self.last_rows: list[tuple[str, dict[str, Any]]] = []

    def sample_once(self, fh: Any) -> None:
        t_ns = self._wall_ns()
        base = kineto_base_ns(t_ns)
        rows = [(self.source, m) for m in self.reader.sample()]
        if self.host is not None:
            rows += [("host", m) for m in self.host.sample()]
        self.last_rows = (
            rows  # the newest sample, for a reader that acts on it (the runner's memory guard)
        )
        for source, metrics in rows:
            line = {
                "t_unix_ns": t_ns,
                "t_trace_us": (t_ns - base) / 1000,
                "source": source,
                **metrics,
            }
            fh.write(orjson.dumps(line).decode() + "\n")
            self.samples_written += 1
        fh.flush()

    def run(self) -> None:
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        with self.out_path.open("a", encoding="utf-8") as fh:
            next_t = self._clock()
            while not self._stop_event.is_set():
                try:
                    self.sample_once(fh)
                except Exception:  # a telemetry hiccup must never end a training run
                    pass
                # Schedule on a fixed grid so sampling cost does not lower the rate below 1 / interval_s. After
                # a stall (a sample slower than the grid, a process that held the GIL) the missed slots are
                # skipped rather than sampled back to back: a burst of rows at one moment says nothing more.
                next_t += self.interval_s
                now = self._clock()
                if next_t < now - self.interval_s:
                    next_t = now
                self._sleep(max(next_t - now, 0.0))

    def request_stop(self) -> None:
        """Ask :meth:`run` to end after its current sample (safe from a signal handler)."""
        self._stop_event.set()

    def stopped(self, wait_s: float = 0.0) -> bool:
        """Whether a stop was asked for, waiting up to ``wait_s`` for one."""
        return self._stop_event.wait(wait_s)

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=2.0)
        close = getattr(self.reader, "close", None)
        if close is not None:
            close()


def read_telemetry(path: os.PathLike[str] | str) -> pd.DataFrame:
    """``telemetry.jsonl`` as a DataFrame (one row per line); a truncated or corrupt line is skipped."""
    rows: list[dict[str, Any]] = []
    p = Path(path)
    if p.exists():
        for raw in p.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                row = json.loads(raw)
            except json.JSONDecodeError:
                continue  # the writer may be mid-line (live run) or was killed mid-line
            if isinstance(row, dict):
                rows.append(row)
    df = pd.DataFrame(rows)
    if "t_unix_ns" in df:
        df = df.sort_values("t_unix_ns", kind="stable").reset_index(drop=True)
    return df
