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

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import orjson
import pandas as pd

from profilers.telemetry.host import MB, HostReader

__all__ = ["FakeNvml", "TelemetrySampler", "kineto_base_ns", "probe_nvml", "read_telemetry"]

KINETO_BASE_PERIOD_S = 7_889_238  # libkineto's ChromeTraceBaseTime granularity


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
