"""The parent's side of one measurement: run a contender in a fresh child, watch its time and RSS, read its answer.

The child is ``trace_parse.py --child KIND`` (the entry script, run by path, in its own session so that its
whole process group can be killed); the parent polls the tree's RSS every 20 ms and enforces the time limit,
the RSS cap and a floor on the machine's available memory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_parse_common import GB, REPO

ENTRY = Path(__file__).resolve().with_name("trace_parse.py")  # what a child runs: ``ENTRY --child KIND ...``
MIN_AVAILABLE = GB  # a child is stopped when the machine's available memory falls below this (others work here)


@dataclass
class Run:
    """One child process: its figures, or why it did not finish."""

    ok: bool
    seconds: float | None = None  # the work, measured inside the child
    wall_s: float = 0.0  # the whole child process, interpreter start and imports included
    peak_rss: int = 0  # bytes
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


def _tree_rss(proc: Any) -> int:
    import psutil
    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def measure(python: str, kind: str, target: str, *, timeout: float, rss_cap: int, env: dict[str, str] | None = None,
            workdir: Path) -> Run:
    """Run one contender in a fresh process; kill it (its whole process group) past ``timeout`` or ``rss_cap``."""
    import psutil
    out = workdir / f"result-{kind}-{os.getpid()}-{time.monotonic_ns()}.json"
    log = workdir / f"stderr-{kind}.log"
    cmd = [python, str(ENTRY), "--child", kind, "--child-target", target, "--child-out", str(out)]
    t0 = time.perf_counter()
    with open(log, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=str(REPO), env=env,
                                start_new_session=True)
    ps = psutil.Process(proc.pid)
    peak = 0
    reason = ""
    status = None
    rusage = None
    while True:
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            break
        peak = max(peak, _tree_rss(ps))
        elapsed = time.perf_counter() - t0
        if not reason and elapsed > timeout:
            reason = f"time limit of {timeout:.0f} s reached"
        elif not reason and peak > rss_cap:
            reason = f"memory cap reached (RSS {peak / GB:.1f} GB > {rss_cap / GB:.1f} GB)"
        elif not reason and psutil.virtual_memory().available < MIN_AVAILABLE:
            reason = (f"the machine ran low on memory (under {MIN_AVAILABLE / GB:.0f} GB available) at RSS "
                      f"{peak / GB:.1f} GB")
        if reason:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status, rusage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    peak = max(peak, rusage.ru_maxrss * 1024)
    if reason:
        return Run(False, None, wall, peak, reason)
    if proc.returncode != 0 or not out.exists():
        tail = log.read_text(errors="replace").strip().splitlines()
        last = next((ln for ln in reversed(tail) if ln.strip()), "no message")
        return Run(False, None, wall, peak, f"exit {proc.returncode}: {last[:200]}")
    detail = json.loads(out.read_text())
    out.unlink()
    return Run(True, float(detail["seconds"]), wall, peak, "", detail)
