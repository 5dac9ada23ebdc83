"""How a run that ended badly is told (``profilers.run.script_output``, ``handle``, ``stopping``):
the status says what happened (``failed`` with the rank that exited non-zero, ``killed`` only for a
kill signal), the error ends with what the script itself printed, a late first step is waited on in
words and then failed with its cause, and ending this process ends the run's whole tree.
Hand-written run folders and small real processes (no torch)."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from profilers.run import stopping
from profilers.run.handle import RunHandle, run_processes, spawn
from profilers.run.records import RunStatus
from profilers.run.script_output import (
    error_line,
    exit_wording,
    failed_ranks,
    printed_tail,
    with_printed,
)
from profilers.store.runs import RunStore
from tests.fake_clock import FakeClock

WAIT_S = 120.0  # an upper bound for a tiny process on a loaded machine, never a timing assertion
NO_GPUS = "Unable to locate sufficient 2 gpus to run this example. Exiting."


def _summary(root: tuple[int, int], other: tuple[int, int] | None) -> str:
    """torchrun's failure summary: the root cause ``(rank, exit code)`` and another failed rank."""

    def entry(rank: int, code: int) -> str:
        sig = f"  ({signal.Signals(-code).name})" if code < 0 else ""
        return (
            f"  time      : (when)\n  host      : localhost\n"
            f"  rank      : {rank} (local_rank: {rank})\n"
            f"  exitcode  : {code} (pid: {4781 + rank}){sig}\n  error_file: <N/A>\n"
        )

    others = f"[1]:\n{entry(*other)}" if other else "  <NO_OTHER_FAILURES>\n"
    return (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        + "=" * 60
        + "\nstepwise_agent.boot FAILED\n"
        + "-" * 60
        + f"\nFailures:\n{others}"
        + "-" * 60
        + f"\nRoot Cause (first observed failure):\n[0]:\n{entry(*root)}"
        + "=" * 60
        + "\n"
    )


def _ranks(run_dir: Path, outputs: dict[int, tuple[str, str]]) -> None:
    for rank, (out, err) in outputs.items():
        folder = run_dir / "ranks" / "ca47a037_x" / "attempt_0" / str(rank)
        folder.mkdir(parents=True)
        (folder / "stdout.log").write_text(out)
        (folder / "stderr.log").write_text(err)


def test_a_rank_that_exits_1_is_failed_by_that_rank_not_killed(tmp_path: Path) -> None:
    """minGPT-ddp on a CPU: rank 1 prints and exits 1, torchrun SIGTERMs rank 0 (read as 'killed'
    before)."""
    (tmp_path / "stderr.log").write_text(
        "Sending process 4781 closing signal SIGTERM\n" + _summary((1, 1), (0, -15))
    )
    _ranks(tmp_path, {0: ("", ""), 1: (NO_GPUS + "\n", "")})
    status, words = exit_wording(tmp_path, 1)
    assert status is RunStatus.FAILED
    assert words == "rank 1 exited with code 1 (torchrun then stopped rank 0)"
    assert failed_ranks(tmp_path) == [1]
    error = with_printed(words, tmp_path, failed_ranks(tmp_path))
    assert error is not None
    assert error.splitlines()[0].endswith(f"the script printed (rank 1): {NO_GPUS}")


def test_killed_only_when_a_kill_signal_ended_the_root_rank(tmp_path: Path) -> None:
    (tmp_path / "stderr.log").write_text(_summary((0, -9), None))
    assert exit_wording(tmp_path, 1) == (RunStatus.KILLED, "rank 0 was killed by SIGKILL")
    (tmp_path / "stderr.log").write_text(_summary((0, -11), None))
    assert exit_wording(tmp_path, 1)[0] is RunStatus.FAILED
    (tmp_path / "stderr.log").write_text("")
    assert exit_wording(tmp_path, 2)[0] is RunStatus.FAILED
    assert exit_wording(tmp_path, -15)[0] is RunStatus.KILLED


def test_every_failed_rank_is_quoted_and_a_quoted_traceback_is_not_repeated(tmp_path: Path) -> None:
    (tmp_path / "stderr.log").write_text(_summary((1, 1), (2, 3)))
    _ranks(
        tmp_path,
        {
            0: ("step 1\n", ""),
            1: ("loading\n", "Traceback (most recent call last):\nValueError: bad shape\n"),
            2: ("", "disk full\n"),
        },
    )
    assert failed_ranks(tmp_path) == [1, 2]
    error = with_printed(
        "rank 1 raised ValueError: bad shape\nTraceback (most recent call last):",
        tmp_path,
        failed_ranks(tmp_path),
    )
    assert error is not None
    first = error.splitlines()[0]
    assert first.endswith("the script printed: loading | disk full"), first
    assert "step 1" not in error  # rank 0 did not fail
    assert error.count("Traceback") == 1


def test_one_process_quotes_its_stdout_then_its_stderr(tmp_path: Path) -> None:
    (tmp_path / "stdout.log").write_text("".join(f"line {i}\n" for i in range(12)))
    (tmp_path / "stderr.log").write_text(
        "USDT: profiler_start\nstepwise: scalars not written\nwarning: slow disk\n"
    )
    expected = [f"line {i}" for i in range(4, 12)] + ["warning: slow disk"]
    assert printed_tail(tmp_path) == {None: expected}
    error = with_printed("no training step was detected", tmp_path)
    assert error is not None
    assert error.splitlines()[0].endswith("line 10 | line 11 | warning: slow disk")
    assert "  line 4" in error.splitlines()  # all of the tail below the first line
    assert with_printed("the error", tmp_path / "nothing-printed") == "the error"


def test_a_table_cell_keeps_the_errors_end() -> None:
    error = "rank 1 exited with code 1 " + "x" * 300 + "; the script printed: Exiting."
    cell = error_line(error + "\nmore")
    assert len(cell) <= 200 and cell.startswith("rank 1 exited")
    assert cell.endswith("the script printed: Exiting.")


# -- small real processes
# ---------------------------------------------------------------------------------------
SLOW_START = textwrap.dedent("""
    import subprocess, sys, time
    print("evaluating 400 batches before step 0", flush=True)
    if sys.argv[1] == "tree":  # a grandchild in a session of its own, as a torchrun rank
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                         start_new_session=True)
    time.sleep(600)
""")


def _spawn(tmp_path: Path, mode: str, **kw: object) -> RunHandle:
    script = tmp_path / "slow_start.py"
    script.write_text(SLOW_START)
    store = RunStore(tmp_path / "store")
    record = store.create("launch", f"slow-{mode}")
    command = [sys.executable, str(script), mode]
    return spawn(store, record.run_id, command, **kw)  # type: ignore[arg-type]


def _printed(handle: RunHandle) -> None:
    deadline = time.monotonic() + WAIT_S
    while "evaluating" not in (handle.run_dir / "stdout.log").read_text():
        assert time.monotonic() < deadline and not handle.poll().finished
        time.sleep(0.05)


def test_a_late_first_step_is_waited_on_in_words_then_failed_with_its_cause(tmp_path: Path) -> None:
    clock = FakeClock()
    handle = _spawn(tmp_path, "plain", hang_clock=clock.monotonic, first_step_timeout_s=30.0)
    try:
        _printed(handle)
        assert handle.progress() is None  # under the first interval: nothing to say yet
        clock.advance(25.0)
        progress = handle.progress() or {}
        assert progress.get("step") is None and progress.get("waiting_s") == 20.0
        assert progress["waiting"] == (
            "waiting for the first step (20 s; the script printed: "
            "evaluating 400 batches before step 0)"
        )
        clock.advance(10.0)
        result = handle.wait(WAIT_S)
    finally:
        handle.cancel("test teardown")
        handle.join(WAIT_S)
    assert result.status is RunStatus.FAILED and result.steps_done == 0
    assert result.error is not None and result.error.startswith(
        "no first step within 30 s; the script printed: evaluating 400 batches before step 0"
    )


def test_ending_this_process_ends_the_runs_whole_tree(tmp_path: Path) -> None:
    handle = _spawn(tmp_path, "tree")
    _printed(handle)
    deadline = time.monotonic() + WAIT_S
    while len(run_processes(handle.run_id)) < 2:  # the script and its grandchild
        assert time.monotonic() < deadline
        time.sleep(0.05)
    before = signal.getsignal(signal.SIGTERM)  # what this test process had: restored after
    with pytest.raises(stopping.Stopped) as stopped:
        with stopping.stop_runs_on_signals():
            os.kill(os.getpid(), signal.SIGTERM)  # as `timeout` ends the command
            time.sleep(WAIT_S)  # the signal interrupts this
    assert stopped.value.exit_code == 128 + signal.SIGTERM
    assert handle.poll() is RunStatus.KILLED and "SIGTERM" in (handle.wait(0).error or "")
    while [p for p in run_processes(handle.run_id) if p.status() != psutil.STATUS_ZOMBIE]:
        assert time.monotonic() < deadline, run_processes(
            handle.run_id
        )  # the tree is gone, not reparented
        time.sleep(0.05)
    assert signal.getsignal(signal.SIGTERM) is before
    assert handle not in stopping.live_runs()  # other tests' runs in this process are theirs


def test_analyze_of_a_run_that_measured_no_step_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It read "median step 0.00 ms · bottleneck: none" and "3605 samples in steady steps"."""
    import json

    from cli.advisors import main as advisors_main
    from profilers.run.records import RunResult

    store = RunStore(tmp_path / "runs")
    record = store.create("launch", "late")
    with open(Path(record.run_dir) / "telemetry.jsonl", "w") as fh:
        for i in range(30):
            fh.write(
                json.dumps(
                    {
                        "t_unix_ns": 10**18 + i * 10**8,
                        "t_trace_us": 0.0,
                        "source": "host",
                        "cpu_pct": 50.0,
                        "rss_mb": 300.0,
                        "cpu_count": 2,
                    }
                )
                + "\n"
            )
    error = "no first step within 5 s; the script printed: evaluating\nmore"
    store.finish(record.run_id, RunResult(RunStatus.FAILED, error=error))
    assert advisors_main(["analyze", record.run_dir]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert "no step was measured" in first
    assert first.endswith(
        "(the run ended: no first step within 5 s; the script printed: evaluating)"
    )
    assert "0.00 ms" not in out and "bottleneck: none" not in out and "in steady steps" not in out
    assert "30 samples over the whole run (no step was measured)" in out
    from advisors.analysis import analyse

    assert analyse(record.run_dir, charts=False).headline == (  # the dashboard's Analysis page
        "No step was measured (the run ended: no first step within 5 s; the script printed: "
        "evaluating)."
    )
