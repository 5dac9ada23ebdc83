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

ENTRY = (
    Path(__file__).resolve().with_name("trace_parse.py")
)  # what a child runs: ``ENTRY --child KIND ...``
MIN_AVAILABLE = (
    GB  # a child is stopped when the machine's available memory falls below this (others work here)
)


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
    """The summed RSS of a process and its children. Forked workers (Stepwise's parse workers) share their
    parent's pages (pandas, numpy), which this counts once per process: an upper bound. (Their PSS would not, but
    reading it costs ~4 ms per process, too much to poll every 20 ms on two cores.)"""
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


def measure(
    python: str,
    kind: str,
    target: str,
    *,
    timeout: float,
    rss_cap: int,
    env: dict[str, str] | None = None,
    workdir: Path,
) -> Run:
    """Run one contender in a fresh process; kill it (its whole process group) past ``timeout`` or ``rss_cap``.
    ``seconds`` is the work as the child timed it (imports excluded)."""
    out = workdir / f"result-{kind}-{os.getpid()}-{time.monotonic_ns()}.json"
    cmd = [python, str(ENTRY), "--child", kind, "--child-target", target, "--child-out", str(out)]
    wall, peak, reason, code, _, log = _limited(
        cmd, kind, timeout=timeout, rss_cap=rss_cap, env=env, workdir=workdir
    )
    if reason:
        return Run(False, None, wall, peak, reason)
    if code != 0 or not out.exists():
        return Run(False, None, wall, peak, f"exit {code}: {_last_line(log)}")
    detail = json.loads(out.read_text())
    out.unlink()
    return Run(True, float(detail["seconds"]), wall, peak, "", detail)


def measure_process(
    cmd: list[str],
    kind: str,
    *,
    timeout: float,
    rss_cap: int,
    env: dict[str, str] | None = None,
    workdir: Path,
    check: Any = None,
) -> Run:
    """Run a whole command as a user would (interpreter start and imports included): ``seconds`` is its wall
    time from start to exit as the parent saw it; ``detail`` has its CPU time (user+sys, from ``wait4``) and
    what ``check(stdout)`` makes of its output (a ValueError there means the run failed)."""
    wall, peak, reason, code, cpu, log = _limited(
        cmd, kind, timeout=timeout, rss_cap=rss_cap, env=env, workdir=workdir, keep_stdout=True
    )
    stdout = log.with_suffix(".out")
    if reason:
        return Run(False, None, wall, peak, reason)
    if code != 0:
        return Run(False, None, wall, peak, f"exit {code}: {_last_line(log)}")
    detail: dict[str, Any] = {"cpu_s": cpu}
    if check is not None:
        try:
            detail.update(check(stdout.read_bytes()))
        except ValueError as err:
            return Run(False, None, wall, peak, f"its output is not what was asked: {err}")
    return Run(True, wall, wall, peak, "", detail)


def _last_line(log: Path) -> str:
    tail = log.read_text(errors="replace").strip().splitlines()
    return next((ln for ln in reversed(tail) if ln.strip()), "no message")[:200]


def _limited(
    cmd: list[str],
    kind: str,
    *,
    timeout: float,
    rss_cap: int,
    env: dict[str, str] | None,
    workdir: Path,
    keep_stdout: bool = False,
) -> tuple[float, int, str, int, float, Path]:
    """Run ``cmd`` under the limits: ``(wall s, peak RSS, why it was stopped or "", exit code, cpu s, stderr log)``."""
    import psutil

    log = workdir / f"stderr-{kind}.log"
    t0 = time.perf_counter()
    with (
        open(log, "wb") as err,
        open(log.with_suffix(".out") if keep_stdout else os.devnull, "wb") as out,
    ):
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=err, cwd=str(REPO), env=env, start_new_session=True
        )
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
            reason = (
                f"the machine ran low on memory (under {MIN_AVAILABLE / GB:.0f} GB available) at RSS "
                f"{peak / GB:.1f} GB"
            )
        if reason:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status, rusage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    peak = max(peak, rusage.ru_maxrss * 1024)
    return wall, peak, reason, proc.returncode, rusage.ru_utime + rusage.ru_stime, log
