"""The watch mode's step log (:mod:`stepwise_agent.step_log`), fed synthetic rows (no training): a million steps
keep a bounded folder with every capture's window whole, the rows are written by the log's own thread, and a run
killed (``kill -9``) or interrupted (Ctrl-C) half way loses at most its last second."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from profilers.run.step_records import rolled_steps, rollups, step_rows, timeline
from stepwise_agent import step_log
from stepwise_agent.step_log import AROUND, KEEP_FIRST, StepLog

T0 = 1_700_000_000 * 10**9
CAPTURE = (500_000, 500_002)  # a capture's profiled steps in the million


def _row(step: int, ms: float = 1.0, capture: int | None = None) -> step_log.Row:
    return (
        step,
        ms,
        2.0 - step / 1e6,
        32,
        0.2,
        capture is not None,
        T0 + int((step + 1) * ms * 1e6),
        512.0,
        capture,
    )


@pytest.mark.slow
def test_a_million_steps_keep_a_bounded_folder_with_the_capture_window_whole(
    tmp_path: Path,
) -> None:
    log = StepLog(tmp_path, 0)
    for step in range(1_000_000):
        capture = 1 if CAPTURE[0] <= step <= CAPTURE[1] else None
        log.rows.append(_row(step, 1.0 + (step % 7) / 10, capture))
        if len(log.rows) >= step_log.WAKE_ROWS:
            log.wake()
    log.close()
    size = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert size < 1_000_000, (
        size
    )  # stated in docs/how-to/watch-a-long-run.md: under 1 MB for a million 1-ms steps
    assert not (tmp_path / step_log.OPEN.format(rank=0)).exists()
    whole = sorted(r["step"] for r in step_rows(tmp_path))
    window = list(range(CAPTURE[0] - AROUND, CAPTURE[1] + AROUND + 1))
    assert whole == [*range(KEEP_FIRST), *window, *range(1_000_000 - AROUND, 1_000_000)]
    assert [r["capture"] for r in step_rows(tmp_path) if "capture" in r] == [1, 1, 1]
    assert rolled_steps(tmp_path) + len(whole) == 1_000_000
    ups = rollups(tmp_path)
    assert max(u["steps"] for u in ups) == step_log.ROLLUP_STEPS
    assert all(
        1.0 <= u["wall_ms_p10"] <= u["wall_ms_median"] <= u["wall_ms_p90"] <= 1.6 for u in ups
    )
    assert all(
        u["data_share"] == pytest.approx(0.2 * u["steps"] / u["wall_ms_sum"], abs=1e-3) for u in ups
    )
    line = timeline(tmp_path)  # the whole run, in order, no step twice and none missing
    assert line["first_step"].iloc[0] == 0 and line["last_step"].iloc[-1] == 999_999
    assert (
        line["first_step"].iloc[1:].to_numpy() == line["last_step"].iloc[:-1].to_numpy() + 1
    ).all()
    assert int(line["steps"].sum()) == 1_000_000


def test_a_roll_up_closes_at_its_minute(tmp_path: Path) -> None:
    log = StepLog(tmp_path, 0)
    for step in range(KEEP_FIRST + 400 + AROUND):
        log.rows.append(_row(step, 1000.0))  # one-second steps: 60 to a roll-up
    log.close()
    ups = rollups(tmp_path)
    assert [u["steps"] for u in ups] == [60] * 6 + [40]


def test_rows_are_written_by_the_log_thread_not_the_training_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writers: set[int] = set()
    original = StepLog._write_open

    def spy(self: StepLog) -> None:
        original(self)
        writers.add(
            threading.get_ident()
        )  # after the write: the rows are read back below once one is whole

    monkeypatch.setattr(StepLog, "_write_open", spy)
    log = StepLog(tmp_path, 0)
    for step in range(10):
        log.rows.append(_row(step))
    deadline = time.monotonic() + 60
    while not writers and time.monotonic() < deadline:
        time.sleep(0.05)
    assert writers == {log.thread.ident} and log.thread.daemon
    assert threading.get_ident() not in writers
    assert [r["step"] for r in step_rows(tmp_path)] == list(
        range(10)
    )  # read back from steps_open.jsonl
    log.close()


CHILD = """
import signal, sys, time
from pathlib import Path
from stepwise_agent.step_log import StepLog
signal.signal(signal.SIGINT, signal.default_int_handler)  # a test worker's children may inherit SIGINT ignored
log = StepLog(Path(sys.argv[1]), 0)
step = 0
try:
    while True:
        wall = 0.001
        time.sleep(wall)
        log.rows.append((step, wall * 1000, 1.0, 8, 0.1, False, time.time_ns(), 100.0, None))
        step += 1
        if step == 2500:
            print("half way", flush=True)
except KeyboardInterrupt:
    log.close()
    print(step, flush=True)
"""


def _child(tmp_path: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "half way"
    time.sleep(1.5)  # past the first KEEP_FIRST steps: some rows are in the open roll-up
    return proc


def test_kill_9_half_way_loses_at_most_the_last_second(tmp_path: Path) -> None:
    proc = _child(tmp_path)
    killed_ns = time.time_ns()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    line = timeline(tmp_path)
    assert line["first_step"].iloc[0] == 0
    assert (
        line["first_step"].iloc[1:].to_numpy() == line["last_step"].iloc[:-1].to_numpy() + 1
    ).all()
    last_ns = max(r["t_unix_ns"] + r["wall_ms"] * 1e6 for r in step_rows(tmp_path))
    # the log writes every half second; more than a second lost would be a second flush missed on a loaded machine
    assert killed_ns - last_ns < 2.0e9
    assert (tmp_path / step_log.OPEN.format(rank=0)).exists()


def test_ctrl_c_half_way_loses_nothing(tmp_path: Path) -> None:
    proc = _child(tmp_path)
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    done = int(out.strip())
    line = timeline(tmp_path)
    assert int(line["steps"].sum()) == done and line["last_step"].iloc[-1] == done - 1
    assert rolled_steps(tmp_path) > 0 and not (tmp_path / step_log.OPEN.format(rank=0)).exists()
