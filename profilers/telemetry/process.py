"""The telemetry sampler in a process of its own, beside a training process.

Measured on an H100 (``benchmarks/results/gpu-2026-11-26-h100.md``): a sampler *thread* inside the training
process waits for the GIL whenever the main thread sits in a long C++ call that holds it (CUDA graph capture,
cuDNN autotuning, ``torch.compile``, CUDA's start-up). NVML rows then stopped for up to 3.1 s in the middle of
the steps, and a CUDA-graph run read 6.3 samples/s instead of 10. A separate process has its own interpreter,
so nothing the training does can hold it back.

``TelemetryProcess`` has the thread's interface (``start``, ``stop``, ``source``, ``note``): the worker starts
it with the training process's pid among its roots. The child (``python -m profilers.telemetry.process``) writes
one JSON line on stdout with the source it chose and why, then samples until SIGTERM, or until the process that
started it is gone.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterable

from profilers.telemetry.proctree import OWN_PIDS
from profilers.telemetry.sampler import TelemetrySampler

START_TIMEOUT_S = 30.0  # the child imports psutil, pandas and NVML before it reports its source


class TelemetryProcess:
    """Runs :class:`TelemetrySampler` in a child process; ``source``/``note`` as the sampler chose them."""

    def __init__(
        self,
        out_path: os.PathLike[str] | str,
        interval_s: float = 0.1,
        root_pids: Iterable[int] | None = None,
    ) -> None:
        self.out_path = Path(out_path)
        self.interval_s = interval_s
        self.root_pids = list(root_pids) if root_pids is not None else [os.getpid()]
        self._proc: subprocess.Popen[str] | None = None
        self._said: dict[str, str] = {}
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        """Starts the child and returns at once: training need not wait for its imports."""
        argv = [
            sys.executable,
            "-m",
            "profilers.telemetry.process",
            str(self.out_path),
            "--interval",
            str(self.interval_s),
            "--parent",
            str(os.getpid()),
            *(f"--pid={p}" for p in self.root_pids),
        ]
        self._proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        OWN_PIDS.add(
            self._proc.pid
        )  # its memory and CPU are Stepwise's, not the run's (watchdog, peaks)
        self._reader = threading.Thread(target=self._read_first_line, daemon=True)
        self._reader.start()

    def _read_first_line(self) -> None:
        p = self._proc
        line = p.stdout.readline() if p is not None and p.stdout is not None else ""
        try:
            said = json.loads(line) if line.strip() else {}
        except json.JSONDecodeError:
            said = {}
        if isinstance(said, dict):
            self._said = {str(k): str(v) for k, v in said.items()}

    def _chosen(self) -> dict[str, str]:
        if self._reader is not None:
            self._reader.join(START_TIMEOUT_S)
        return self._said

    @property
    def source(self) -> str:
        """ "nvml" or "host", as the child chose (host when it never said)."""
        return self._chosen().get("source", "host")

    @property
    def note(self) -> str:
        said = self._chosen()
        if not said:
            return "the telemetry process did not start (no samples)"
        return f"{said.get('note')}; sampled in a process of its own"

    def stop(self, wait: bool = True) -> None:
        """Ends the sampler. ``wait=False`` for a process about to ``os._exit``: the signal is sent and nothing
        waited for (the training thread may still be running steps; the sampler also ends when its parent is
        gone)."""
        p = self._proc
        if p is None or p.poll() is not None:
            return
        p.terminate()
        if not wait:
            return
        try:
            p.wait(timeout=3.0)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=3.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--parent", type=int, required=True, help="stop when this process is gone")
    ap.add_argument(
        "--pid", type=int, action="append", default=[], help="a root process for host metrics"
    )
    a = ap.parse_args(argv)
    OWN_PIDS.add(
        os.getpid()
    )  # this process is the watched process's child: its own rows must leave it out
    sampler = TelemetrySampler(a.out, interval_s=a.interval, root_pids=a.pid or [a.parent])
    print(json.dumps({"source": sampler.source, "note": sampler.note}), flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sampler.request_stop())

    def watch_parent() -> None:
        while not sampler.stopped(0.5):
            if os.getppid() != a.parent:  # re-parented: the training process is gone
                sampler.request_stop()

    threading.Thread(target=watch_parent, daemon=True).start()
    sampler.run()
    close = getattr(sampler.reader, "close", None)
    if close is not None:
        close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
