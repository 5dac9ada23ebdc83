"""A started run's process (``profilers.run.handle``): one that ends well, crashes, is killed or hangs always leaves
a stored, honest run. ``spawn`` is driven with a small fake process (fast, exact); real runs of the sample
workloads, launched as scripts, are in ``tests/sample_runs/test_workload_runs.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from typing import Any, Callable, Iterator

import psutil
import pytest

from profilers.run.handle import RunHandle, classify_exit, run_processes, spawn
from profilers.run.records import RunStatus
from profilers.store.runs import RunStore
from tests.fake_clock import FakeClock

WAIT_S = (
    120.0  # generous upper bound for a tiny run on a loaded 2-core machine (not a timing assertion)
)

FAKE_RUN = textwrap.dedent("""
    import json, os, subprocess, sys, time
    from pathlib import Path
    run_dir, mode = Path(sys.argv[1]), sys.argv[2]
    with open(run_dir / "steps.jsonl", "a") as fh:
        for step in range(6):
            fh.write(json.dumps({"rank": 0, "step": step, "wall_ms": 5.0, "loss": 1.0 / (step + 1),
                                 "samples": 8, "profiled": False, "t_unix_ns": time.time_ns()}) + "\\n")
            fh.flush()
            blocks = step == 2 and mode in ("block", "hang")
            if blocks:  # a grandchild in a session of its own, like a torchrun rank
                child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                         start_new_session=True)
                (run_dir / "child.pid").write_text(str(child.pid))
            (run_dir / "progress.json.tmp").write_text(json.dumps({"step": step + 1, "total_steps": 6}))
            os.replace(run_dir / "progress.json.tmp", run_dir / "progress.json")
            if step == 2 and mode == "crash":
                print("something broke in the data pipeline", file=sys.stderr)
                sys.exit(3)
            if blocks:
                time.sleep(600)
    (run_dir / "result.json").write_text(json.dumps({"status": "ok", "steps_done": 6, "step_time_ms": 5.0}))
""")


_STARTED: list[RunHandle] = []


@pytest.fixture(autouse=True)
def _stop_what_a_failed_test_left() -> Iterator[None]:
    yield
    while _STARTED:
        handle = _STARTED.pop()
        handle.cancel("test teardown")
        handle.join(WAIT_S)


def _fake(
    tmp_path: Path,
    mode: str,
    hang_timeout_s: float | None = None,
    hang_clock: Callable[[], float] = time.monotonic,
) -> tuple[RunStore, RunHandle]:
    script = tmp_path / "fake_run.py"
    script.write_text(FAKE_RUN)
    store = RunStore(tmp_path / "store")
    record = store.create("launch", f"fake-{mode}")
    handle = spawn(
        store,
        record.run_id,
        [sys.executable, str(script), record.run_dir, mode],
        hang_timeout_s=hang_timeout_s,
        hang_clock=hang_clock,
    )
    _STARTED.append(handle)
    return store, handle


def _wait_for_step(handle: RunHandle, step: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while ((handle.progress() or {}).get("step") or 0) < step:
        assert time.monotonic() < deadline and not handle.poll().finished, (
            "the run never got that far"
        )
        time.sleep(0.05)


def _until(condition: Any, timeout_s: float = 10.0) -> bool:
    """``condition()`` became true within ``timeout_s`` (a killed process takes a moment to be reaped)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _gone(pid: int) -> bool:
    """``pid`` has exited: no such process, or a zombie waiting for its parent (init) to reap it."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_fake_run_ok(tmp_path: Path) -> None:
    store, handle = _fake(tmp_path, "ok")
    result = handle.wait(WAIT_S)
    assert result.status is RunStatus.OK and result.exit_code == 0
    assert store.get(handle.run_id).status is RunStatus.OK


def test_crash_without_result_is_failed_with_steps_and_stderr(tmp_path: Path) -> None:
    store, handle = _fake(tmp_path, "crash")
    result = handle.wait(WAIT_S)
    assert result.status is RunStatus.FAILED and result.exit_code == 3
    assert "exited with code 3" in (result.error or "") and "data pipeline" in (result.error or "")
    assert result.steps_done == 3 and len(store.read_steps(handle.run_id)) == 3


def test_sigkill_mid_run_is_killed_with_steps(tmp_path: Path) -> None:
    store, handle = _fake(tmp_path, "block")
    _wait_for_step(handle, 3)
    os.kill(handle.pid, signal.SIGKILL)  # type: ignore[arg-type]
    result = handle.wait(WAIT_S)
    assert result.status is RunStatus.KILLED and "SIGKILL" in (result.error or "")
    assert result.steps_done == 3 and store.get(handle.run_id).status is RunStatus.KILLED
    assert _until(
        lambda: run_processes(handle.run_id) == []
    )  # the orphaned grandchild went with it


def test_cancel_kills_the_whole_tree_even_other_sessions(tmp_path: Path) -> None:
    store, handle = _fake(tmp_path, "block")
    _wait_for_step(handle, 3)
    child_pid = int((handle.run_dir / "child.pid").read_text())
    handle.cancel()
    result = handle.wait(WAIT_S)
    assert result.status is RunStatus.KILLED and result.error == "cancelled by the user"
    assert result.steps_done == 3
    assert _until(lambda: _gone(child_pid))


def test_a_cancel_asked_before_the_process_started_still_stops_it(tmp_path: Path) -> None:
    """The Optimise race: a trial's record exists (RUNNING) a moment before its process; a cancel asked in that
    moment finds no process to signal. The request is stored, and the handle honours it once the process runs:
    the trial is stored killed, not left to run its course and stored ok."""
    import threading

    from profilers.run.handle import cancel_run

    script = tmp_path / "fake_run.py"
    script.write_text(FAKE_RUN)
    store = RunStore(tmp_path / "store")
    record = store.create("launch", "fake-block")
    asked = threading.Thread(
        target=cancel_run, args=(store, record.run_id, "cancelled by you (test)")
    )
    asked.start()  # no pid stored yet: cancel_run waits a grace for one, the handle will see the request anyway
    time.sleep(0.1)
    handle = spawn(store, record.run_id, [sys.executable, str(script), record.run_dir, "block"])
    _STARTED.append(handle)
    result = handle.wait(WAIT_S)
    asked.join(WAIT_S)
    assert result.status is RunStatus.KILLED and result.error == "cancelled by you (test)"
    assert store.get(record.run_id).status is RunStatus.KILLED
    assert _until(lambda: run_processes(record.run_id) == [])


def test_a_stop_request_stored_by_another_process_is_honoured_by_the_watcher(
    tmp_path: Path,
) -> None:
    store, handle = _fake(tmp_path, "block")
    _wait_for_step(handle, 3)
    store.request_cancel(
        handle.run_id, "cancelled elsewhere"
    )  # only the marker: no signal sent by anyone
    result = handle.wait(WAIT_S)
    assert result.status is RunStatus.KILLED and result.error == "cancelled elsewhere"
    assert result.steps_done == 3


@pytest.mark.slow  # a real process left to hang until the backstop: the fast lane keeps the runner's other stops
def test_the_backstop_stops_a_hung_run(tmp_path: Path) -> None:
    # The backstop's time is a fake clock that moves only once the worker has written its last step: it
    # cannot fire while steps still come, and the test need not wait 3 s of wall time for it.
    clock = FakeClock()
    store, handle = _fake(tmp_path, "hang", hang_timeout_s=3.0, hang_clock=clock.monotonic)
    _wait_for_step(handle, 3)
    deadline = time.monotonic() + WAIT_S
    while handle.poll() is RunStatus.RUNNING:
        assert time.monotonic() < deadline, "the backstop never stopped the hung run"
        clock.advance(0.5)
        time.sleep(0.05)
    assert clock.elapsed() > 3.0
    result = handle.wait(WAIT_S)
    assert result.status is RunStatus.KILLED and "no step finished" in (result.error or "")
    assert result.steps_done == 3


def test_classify_exit() -> None:
    assert classify_exit(-9)[0] is RunStatus.KILLED
    assert classify_exit(-11)[0] is RunStatus.FAILED
    assert classify_exit(75)[0] is RunStatus.OUT_OF_MEMORY
    assert classify_exit(1, "Signal 9 (SIGKILL) received by PID 123")[0] is RunStatus.KILLED
    assert classify_exit(2)[0] is RunStatus.FAILED


@pytest.mark.slow  # a second real process cancels: the fast lane keeps the in-process cancel tests
def test_cancel_run_from_another_process_without_a_handle(tmp_path: Path) -> None:
    from profilers.run.handle import cancel_run

    store, handle = _fake(tmp_path, "block")
    _wait_for_step(handle, 3)
    child_pid = int((handle.run_dir / "child.pid").read_text())
    code = (
        "import sys; from profilers.store.runs import RunStore; from profilers.run.handle import cancel_run; "
        "print(cancel_run(RunStore(sys.argv[1]), sys.argv[2]).value)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(store.root), handle.run_id],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert out.stdout.strip() == "killed", out.stderr
    result = handle.wait(WAIT_S)
    assert result.status is RunStatus.KILLED and result.steps_done == 3
    assert _until(lambda: _gone(child_pid))
    assert cancel_run(store, handle.run_id) is RunStatus.KILLED  # a finished run stays as it is
