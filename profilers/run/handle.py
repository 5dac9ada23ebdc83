"""A started run's process: follow it, cancel its whole process tree, and store its result whatever happens.

The process runs in its own session (so its group can be signalled at once) and a watcher thread keeps a
snapshot of its descendants, because ``torchrun`` starts each rank in a session of its own. When the process
ends, leftovers (DataLoader workers, ranks) are killed, and the result is stored: the ``result.json`` made from
the agent's files when there are any (``agent_files.finish_launch``), else a result salvaged from the steps and
telemetry written so far, with the exit code or signal and the tail of ``stderr.log`` named in the error.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import psutil

from profilers.run.agent_files import (
    TELEMETRY_INTERVAL_S,
    WATCH_TELEMETRY_INTERVAL_S,
    LaunchMonitor,
    finish_launch,
)
from profilers.run.agent_env import RUN_ID_ENV, agent_settings, child_environment
from profilers.run.captures import store_captures
from profilers.run.rank_watch import RankFollower, rank_follower
from profilers.run import stopping
from profilers.run.records import RunResult, RunStatus
from profilers.run.script_output import (
    PRINTED,
    classify_code,
    exit_wording,
    failed_ranks,
    printed_tail,
    with_printed,
)
from profilers.store.files import read_json, write_json_atomic
from profilers.store.runs import RunStore

EXIT_OK, EXIT_FAILED, EXIT_OUT_OF_MEMORY = 0, 1, 75
CANCEL_GRACE_S = 3.0  # SIGTERM first; SIGKILL for whatever still lives after this
TICK_S = 0.25
SNAPSHOT_TICKS = (
    8  # the process tree is read every 2 s (reading it scans every process on the host, ~1 ms); a
)
# stop reads it again, and finds the run's orphans by their environment (RUN_ID_ENV)
AGENT_SETTINGS_FILE = (
    "agent_settings.json"  # what Stepwise set for the agent itself (agent_env.agent_settings)
)
STDERR_TAIL_LINES, STDERR_TAIL_CHARS = 20, 2000
# progress says "waiting for the first step" from this long on, anew each such interval
WAIT_REPORT_S = 10.0


class RunHandle:
    """A run in progress. ``poll``/``progress``/``cancel`` never block; ``wait`` returns the stored result."""

    def __init__(
        self,
        store: RunStore,
        run_id: str,
        hang_timeout_s: float | None = None,
        hang_clock: Callable[[], float] = time.monotonic,
        first_step_timeout_s: float | None = None,
    ) -> None:
        self.store, self.run_id = store, run_id
        self.run_dir: Path = store.path(run_id)
        self._hang_timeout_s = hang_timeout_s
        self._first_step_timeout_s = first_step_timeout_s  # None: the first step may take any time
        self._started_at = hang_clock()
        # (interval, progress) while no step has ended
        self._waiting: tuple[int, dict[str, Any]] | None = None
        self._hang_clock = (
            hang_clock  # what the hang backstop measures "no step for so long" on (tests: a fake)
        )
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._result: RunResult | None = None
        self._stop_reason: str | None = None
        # a stop by the runner for the script's sake (no first step in time) is ``failed``
        self._stop_status = RunStatus.KILLED
        self._kill_at: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._tree: dict[int, psutil.Process] = {}
        self._monitor: LaunchMonitor | None = (
            None  # a launched script: telemetry from outside, memory guard
        )
        self.watching = (
            False  # a watched run (stepwise watch): its captures become runs as they appear
        )
        self.ranks: RankFollower | None = None  # a watched run of several ranks: who falls behind

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def poll(self) -> RunStatus:
        return self._result.status if self._result is not None else RunStatus.RUNNING

    def progress(self) -> dict | None:
        """The run's latest ``progress.json`` (step, total_steps, loss, eta_s, …). Before its first
        step: None, or, from :data:`WAIT_REPORT_S` on, ``{"step": None, "waiting_s": N, "waiting":
        "waiting for the first step (N s; the script printed: …)"}`` (N in whole intervals, so a
        reader sees it change that often)."""
        stored = self.store.read_progress(self.run_id)
        if (stored and stored.get("step")) or self._result is not None or self._proc is None:
            return stored
        waited = self._hang_clock() - self._started_at
        interval = int(waited // WAIT_REPORT_S)
        if interval < 1:
            return stored
        if self._waiting is None or self._waiting[0] != interval:
            seconds = interval * WAIT_REPORT_S
            said = self.last_printed()
            text = f"waiting for the first step ({seconds:.0f} s" + (
                f"; {PRINTED}: {said})" if said else ")"
            )
            self._waiting = (
                interval,
                {
                    **(stored or {}),
                    "step": None,
                    "status": "running",
                    "waiting_s": seconds,
                    "waiting": text,
                },
            )
        return self._waiting[1]

    def last_printed(self) -> str:
        """The last line the script printed (any rank), for a progress line; empty when none."""
        tails = printed_tail(self.run_dir, ranks=None if failed_ranks(self.run_dir) else [0])
        lines = [line for lines in tails.values() for line in lines]
        return lines[-1].strip()[-160:] if lines else ""

    def cancel(self, reason: str = "cancelled by the user") -> None:
        """Stop the whole process tree (SIGTERM, then SIGKILL after a grace); the run is stored ``killed``."""
        self._stop(reason, RunStatus.KILLED)

    def _stop(self, reason: str, status: RunStatus) -> None:
        with self._lock:
            if self._done.is_set() or self._stop_reason is not None:
                return
            self._stop_reason, self._stop_status = reason, status
            self._kill_at = time.monotonic() + CANCEL_GRACE_S
        with contextlib.suppress(
            Exception
        ):  # the marker is for readers; the stop must happen regardless
            self.store.request_cancel(self.run_id, reason)
        self._signal_tree(signal.SIGTERM)

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds; True when the run has ended and its result is stored."""
        return self._done.wait(timeout)

    def wait(self, timeout: float | None = None) -> RunResult:
        """The stored result; raises TimeoutError when the run has not ended within ``timeout``."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"run {self.run_id} still running after {timeout} s")
        assert self._result is not None
        return self._result

    # -- inside ----------------------------------------------------------------------------------------------
    def _launch(
        self, command: list[str], extra_env: Mapping[str, str] | None, cwd: str | None = None
    ) -> None:
        env = child_environment(os.environ, extra_env, self.run_id, agent=self._monitor is not None)
        if self._monitor is not None:
            write_json_atomic(self.run_dir / AGENT_SETTINGS_FILE, agent_settings(env))
        try:
            with (
                open(self.run_dir / "stdout.log", "ab") as out,
                open(self.run_dir / "stderr.log", "ab") as err,
            ):
                self._proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    env=env,
                    start_new_session=True,
                    close_fds=True,
                    cwd=cwd,
                )
        except OSError as err:
            self._store_result(
                self.store.salvage(
                    self.run_id, RunStatus.FAILED, f"could not start {command[0]}: {err}"
                )
            )
            return
        try:
            started = psutil.Process(self._proc.pid).create_time()
        except psutil.Error:
            started = None
        stopping.register(self)  # ending this process stops the run (profilers.run.stopping)
        self.store.update(self.run_id, pid=self._proc.pid, pid_started=started)
        if self._monitor is not None:
            self._monitor.start(self._proc.pid)
        threading.Thread(target=self._watch, name=f"stepwise-{self.run_id}", daemon=True).start()

    def _watch(self) -> None:
        assert self._proc is not None
        pid = self._proc.pid
        last_step, last_change = None, self._hang_clock()
        code: int | None
        ticks = 0
        try:
            # WNOWAIT: the finished leader stays a zombie, so its process group cannot be reused while we
            # kill what is left in it.
            while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                if ticks % SNAPSHOT_TICKS == 0:
                    self._snapshot_tree()
                ticks += 1
                if (
                    self._stop_reason is None
                ):  # a stop asked elsewhere (``cancel_run``), even before our pid was
                    asked = self.store.read_cancel(
                        self.run_id
                    )  # stored: honoured here, so it cannot be missed
                    if asked is not None:
                        self.cancel(asked)
                if self._kill_at is not None and time.monotonic() > self._kill_at:
                    self._signal_tree(signal.SIGKILL, by_environment=False)
                progress = self.progress()
                if self.watching:
                    if self.ranks is not None:
                        self.ranks.tick()
                    store_captures(self.store, self.run_id)
                if self._monitor is not None and self._monitor.tick(progress):
                    self._signal_tree(signal.SIGKILL, by_environment=False)
                step = (progress or {}).get("step")
                if self._first_step_late(step):
                    said = self.last_printed()
                    self._stop(
                        f"no first step within {self._first_step_timeout_s:g} s"
                        + (f"; {PRINTED}: {said}" if said else "; the script printed nothing")
                        + " (--first-step-timeout sets the wait)",
                        RunStatus.FAILED,
                    )
                if step != last_step:
                    last_step, last_change = step, self._hang_clock()
                elif (
                    self._hang_timeout_s is not None
                    and last_step is not None
                    and self._hang_clock() - last_change > self._hang_timeout_s
                ):
                    self.cancel(
                        f"stopped by the runner: no step finished for {self._hang_timeout_s:g} s"
                    )
                time.sleep(TICK_S)
            self._signal_tree(signal.SIGKILL)
            if self._monitor is not None:
                self._monitor.stop()  # the tree is gone: the last sample holds the peak it reached
            code = self._proc.wait()
            if self.watching:
                store_captures(self.store, self.run_id, final=True)
            if self._monitor is not None and self.store.read_result(self.run_id) is None:
                finish_launch(
                    self.run_dir, code, self._monitor, self.store.read_manifest(self.run_id)
                )
            result = self._result_for_exit(code)
        except BaseException as err:  # the watcher must always leave a stored result behind
            code, error = self._proc.poll(), f"the runner lost the run: {err!r}"
            try:
                result = self.store.salvage(self.run_id, RunStatus.FAILED, error, code)
            except Exception:
                result = RunResult(
                    RunStatus.FAILED, error=error, exit_code=code, finished_unix=time.time()
                )
        self._store_result(result)

    def _first_step_late(self, step: Any) -> bool:
        return (
            self._first_step_timeout_s is not None
            and not step
            and self._stop_reason is None
            and self._hang_clock() - self._started_at > self._first_step_timeout_s
        )

    def _store_result(self, result: RunResult) -> None:
        stopping.unregister(self)
        try:
            self.store.finish(self.run_id, result)
        except (
            Exception
        ) as err:  # e.g. the folder was deleted under us: the caller still gets its result
            result = result.with_(
                warnings=(*result.warnings, f"the result could not be stored: {err!r}")
            )
        finally:
            self._result = result
            self._done.set()

    def _snapshot_tree(self) -> None:
        if self._proc is None:
            return
        try:
            for child in psutil.Process(self._proc.pid).children(recursive=True):
                self._tree.setdefault(child.pid, child)
        except psutil.Error:
            pass

    def _signal_tree(self, sig: signal.Signals, by_environment: bool = True) -> None:
        if self._proc is None:
            return
        self._snapshot_tree()
        if (
            by_environment
        ):  # also orphans spawned after the last snapshot, whose parent is already gone
            for proc in run_processes(self.run_id):
                self._tree.setdefault(proc.pid, proc)
        try:
            os.killpg(self._proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for proc in list(self._tree.values()):
            try:
                proc.send_signal(sig)  # psutil refuses a pid that was reused by another process
            except psutil.Error:
                self._tree.pop(proc.pid, None)

    def _result_for_exit(self, code: int) -> RunResult:
        stored = self.store.read_result(self.run_id)
        # a stop asked from elsewhere (another session, after a reload: ``cancel_run``) is a cancel too
        reason = self._stop_reason or self.store.read_cancel(self.run_id)
        if stored is not None and stored.status.finished:
            if reason is None or (code == EXIT_OK and stored.status is RunStatus.OK):
                result = stored.with_(exit_code=code)
            else:
                result = stored.with_(status=self._stop_status, error=reason, exit_code=code)
        elif reason is not None:
            result = self.store.salvage(self.run_id, self._stop_status, reason, code)
        else:
            status, what = exit_wording(self.run_dir, code)
            result = self.store.salvage(
                self.run_id, status, f"{what} without writing a result", code
            )
        if result.status is RunStatus.OK:
            return result
        ranks = failed_ranks(self.run_dir)
        if ranks and result.error and not result.error.startswith("rank"):
            result = result.with_(error=f"rank {ranks[0]}: {result.error}")
        return result.with_(error=with_printed(result.error, self.run_dir, ranks or None))


def follow(
    handle: RunHandle,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    timeout_s: float | None = None,
    poll_s: float = 0.25,
) -> RunResult:
    """Wait for ``handle``, reporting each new ``progress.json`` to ``on_progress`` and cancelling after
    ``timeout_s`` (the run is then stored ``killed``); a crash or kill is a result with a status, never an
    exception."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    last: dict[str, Any] | None = None

    def report() -> None:
        nonlocal last
        progress = handle.progress() if on_progress is not None else None
        if on_progress is not None and progress is not None and progress != last:
            last = progress
            on_progress(progress)

    while not handle.poll().finished:
        report()
        if deadline is not None and time.monotonic() > deadline:
            handle.cancel(f"timed out after {timeout_s:g} s")
        handle.join(poll_s)
    report()  # the last word, even when the run ended between two polls
    return handle.wait()


def spawn(
    store: RunStore,
    run_id: str,
    command: list[str],
    extra_env: Mapping[str, str] | None = None,
    hang_timeout_s: float | None = None,
    cwd: str | None = None,
    hang_clock: Callable[[], float] = time.monotonic,
    agent: bool = False,
    first_step_timeout_s: float | None = None,
) -> RunHandle:
    """Start ``command`` (in ``cwd``, default ours) for the stored run ``run_id`` and return its handle.
    ``agent``: the command boots :mod:`stepwise_agent.boot` (a launched script): telemetry is sampled from here,
    the memory guard watches, and ``result.json`` is made from the agent's files (``agent_files``)."""
    handle = RunHandle(store, run_id, hang_timeout_s, hang_clock, first_step_timeout_s)
    if agent:
        boot = read_json(handle.run_dir / "boot.json")
        handle.watching = isinstance(boot, dict) and isinstance(boot.get("watch"), dict)
        handle._monitor = LaunchMonitor(
            handle.run_dir,
            {**os.environ, **(extra_env or {})},
            WATCH_TELEMETRY_INTERVAL_S if handle.watching else TELEMETRY_INTERVAL_S,
        )
        if handle.watching:
            handle.ranks = rank_follower(handle.run_dir, boot)
    handle._launch(command, extra_env, cwd)
    return handle


def cancel_run(
    store: RunStore,
    run_id: str,
    reason: str = "cancelled by the user",
    grace_s: float = CANCEL_GRACE_S,
) -> RunStatus:
    """Cancel a run from any process, e.g. a dashboard restarted after starting it (no handle at hand).

    Signals the run's process group and descendants (SIGTERM, SIGKILL after ``grace_s``) when the stored
    pid is still that process; a watching handle elsewhere then stores the result, else it is salvaged here.
    """
    from profilers.store.files import pid_alive

    record = store.get(run_id)
    if record.status.finished:
        return record.status
    store.request_cancel(run_id, reason)
    manifest = store.read_manifest(run_id)
    pid, started = manifest.get("pid"), manifest.get("pid_started")
    deadline = time.monotonic() + grace_s
    while pid is None and not run_processes(run_id) and time.monotonic() < deadline:
        # created, not started yet: its handle honours the request once it starts; wait for its pid a moment
        # rather than store "killed" over a process that is about to run
        time.sleep(TICK_S)
        if store.get(run_id).status.finished:
            return store.get(run_id).status
        manifest = store.read_manifest(run_id)
        pid, started = manifest.get("pid"), manifest.get("pid_started")
    procs = run_processes(run_id)
    if pid is not None and pid_alive(pid, started):
        leader = psutil.Process(int(pid))
        procs += [leader, *leader.children(recursive=True)]
    if procs:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError, TypeError, ValueError):
                if pid is not None and pid_alive(pid, started):
                    os.killpg(int(pid), sig)
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(sig)
            if _wait_gone(procs, grace_s if sig == signal.SIGTERM else 5.0):
                break
    record = store.get(run_id)
    if not record.status.finished:
        time.sleep(TICK_S * 4)  # give a watching handle the chance to store its own, fuller result
        record = store.get(run_id)
    if not record.status.finished:
        record = store.finish(run_id, store.salvage(run_id, RunStatus.KILLED, reason))
    return record.status


def run_processes(run_id: str) -> list[psutil.Process]:
    """Every live process started for ``run_id``: the runner puts ``STEPWISE_RUN_ID`` in their environment,
    which all descendants inherit, so even orphans whose parent died are found."""
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(RUN_ID_ENV) == run_id and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _wait_gone(procs: list[psutil.Process], timeout: float) -> bool:
    """Wait until every process has ended (zombies count as ended: we must not reap another's child)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for proc in procs:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
            except psutil.Error:
                pass
        if not alive or time.monotonic() > deadline:
            return not alive
        time.sleep(0.05)


def classify_exit(code: int, stderr_tail_text: str = "") -> tuple[RunStatus, str]:
    """Status and wording for a process that ended without a result: a kill signal means ``killed``
    (:func:`profilers.run.script_output.classify_code`; a run's folder: ``exit_wording``)."""
    return classify_code(code, stderr_tail_text)


def stderr_tail(run_dir: Path) -> str:
    """The last lines of ``stderr.log`` (bounded), for error messages."""
    try:
        with open(run_dir / "stderr.log", "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if line.strip()][-STDERR_TAIL_LINES:]
    return "\n".join(lines)[-STDERR_TAIL_CHARS:]
