"""The profiler's own cost is the profiler's (issue 29, item 6).

Slow: an LBFGS script (``tests/scripts/lbfgs_lstm_train.py``: closures of an LSTMCell loop, like pytorch/examples
``time_sequence_prediction``) whose profiled step outgrows a profile budget the test sets is cut mid-step: the
run ends ``ok`` with "the profiler's events outgrew …", keeps its partial trace, records the unprofiled and the
profiled peaks apart, ends ``progress.json`` in its final status, and no advice tells it to shrink its batch.
Fast: the guard's decisions on fed samples, the default limit's rule, and the final progress status of a run
killed before its agent could write one.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import psutil
import pytest

from advisors.diagnosis import diagnose
from advisors.experiments.optimize import BaselineFailed
from advisors.experiments.trials import RunOutcome
from cli.advisors import analyze
from advisors.observation import observe_run
from profilers.run import memory_guard
from profilers.run.launch import launch
from profilers.run.memory_guard import MemoryGuard
from profilers.run.records import RunResult, RunStatus
from profilers.store.runs import RunStore

LBFGS = Path(__file__).resolve().parents[2] / "scripts" / "lbfgs_lstm_train.py"
BATCH_ADVICE = ("smaller batch", "micro-batch", "accumulate gradients", "grad_accumulation")


def _agent(tmp_path: Path) -> None:
    (tmp_path / "agent_pids.txt").write_text("")  # no process to signal


def test_a_profile_that_outgrows_its_budget_is_cut_not_blamed_on_the_script(tmp_path: Path) -> None:
    _agent(tmp_path)
    guard = MemoryGuard(
        tmp_path, {"STEPWISE_MEMORY_LIMIT_MB": "4000", "STEPWISE_PROFILE_BUDGET_MB": "1000"}
    )
    for rss in (300.0, 350.0, 340.0):
        assert not guard.observe(rss, {"phase": "unprofiled", "step": 1})
    guard.observe(
        420.0, {"phase": "profiling", "step": 2}
    )  # recording grew 70 of the 1000 / 10 it may
    assert guard.cut is None and guard.profile_limit_mb() == 450.0
    guard.observe(460.0, {"phase": "profiling", "step": 2})
    assert guard.cut is not None and guard.trip is None and guard.cut.unprofiled_mb == 350.0
    assert "the profiler's events outgrew" in guard.cut.message()
    guard.observe(470.0, {"phase": "exporting", "step": 2})
    guard.observe(465.0, {"phase": "cut", "step": 2})
    assert (
        guard.trip is None and guard.peak_unprofiled_mb == 350.0 and guard.peak_profiled_mb == 470.0
    )
    assert json.loads((tmp_path / "memory_guard.json").read_text())["action"] == "profile_cut"


def test_the_scripts_own_growth_after_a_cut_ends_the_run(tmp_path: Path) -> None:
    _agent(tmp_path)
    guard = MemoryGuard(tmp_path, {"STEPWISE_MEMORY_LIMIT_MB": "1000"})
    guard.observe(400.0, {"phase": "unprofiled", "step": 1})
    guard.observe(
        455.0, {"phase": "profiling", "step": 2}
    )  # recording may add (1000 - 400) / 10 = 60 MiB
    assert guard.cut is None
    guard.observe(1100.0, {"phase": "profiling", "step": 2})  # past it while recording: cut first
    assert guard.cut is not None and guard.trip is None
    guard.observe(1100.0, {"phase": "cut", "step": 2})
    guard.observe(1140.0, {"phase": "cut", "step": 2})  # within the margin after the cut
    assert guard.trip is None
    guard.observe(1300.0, {"phase": "cut", "step": 2})
    assert (
        guard.trip is not None and guard.trip.after_cut and "script's own" in guard.trip.message()
    )


def test_the_agents_exact_unprofiled_peak_is_the_budgets_floor(tmp_path: Path) -> None:
    _agent(tmp_path)
    guard = MemoryGuard(
        tmp_path, {"STEPWISE_MEMORY_LIMIT_MB": "4000", "STEPWISE_PROFILE_BUDGET_MB": "1000"}
    )
    guard.observe(
        300.0, {"phase": "unprofiled", "step": 1}
    )  # the samples missed a short step's 500 MiB peak
    guard.observe(520.0, {"phase": "profiling", "step": 2, "peak_unprofiled_mb": 500.0})
    assert (
        guard.cut is None
        and guard.peak_unprofiled_mb == 500.0
        and guard.profile_limit_mb() == 600.0
    )


def test_outside_the_profile_the_limit_ends_the_run(tmp_path: Path) -> None:
    _agent(tmp_path)
    guard = MemoryGuard(tmp_path, {"STEPWISE_MEMORY_LIMIT_MB": "1000"})
    guard.observe(1200.0, {"phase": "unprofiled", "step": 0})
    assert guard.trip is not None and guard.cut is None and not guard.trip.after_cut


def test_the_default_limit_leaves_room_for_the_rest_of_the_machine() -> None:
    limit, source = memory_guard.memory_limit_mb({})
    vm = psutil.virtual_memory()
    reserve = max(memory_guard.RESERVE_MIN_MB, memory_guard.RESERVE_SHARE * vm.total / 2**20)
    available = vm.available / 2**20
    assert limit <= memory_guard.GUARD_SHARE * available + 1.0
    assert limit <= max(available - reserve, 0.25 * available) + 1.0
    assert "leaving the machine at least" in source


def test_a_killed_run_ends_its_progress_in_a_final_status(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    record = store.create(kind="launch", label="killed")
    (Path(record.run_dir) / "progress.json").write_text(
        json.dumps({"step": 3, "status": "running"})
    )
    store.finish(record.run_id, RunResult(status=RunStatus.KILLED, error="killed by SIGKILL"))
    assert json.loads((Path(record.run_dir) / "progress.json").read_text())["status"] == "killed"


def test_analyze_reports_the_peaks_apart_and_names_the_cut(tmp_path: Path) -> None:
    cut = "the profiler's events outgrew the profile's memory budget during step 2: …"
    (tmp_path / "result.json").write_text(
        json.dumps(
            RunResult(
                RunStatus.OK,
                steps_done=3,
                profiled_then_stopped=1,
                peak_memory_mb=795.0,
                peak_memory_unprofiled_mb=375.0,
                peak_memory_profiled_mb=795.0,
                profile_cut=cut,
            ).to_dict()
        )
    )
    (tmp_path / "steps.jsonl").write_text("")
    out = analyze(str(tmp_path))
    run = out["run"]
    assert (
        run["peak_memory_unprofiled_mb"],
        run["peak_memory_profiled_mb"],
        run["profile_cut"],
    ) == (375.0, 795.0, cut)
    assert run["observed_to_end"] is False
    rules = {f["rule"] for f in out["findings"]}
    assert "MEM007" in rules and "MEM002" not in rules


def test_a_baseline_out_of_memory_says_so_once() -> None:
    error = (
        "out of memory: the memory guard ended the run during step 0: the process tree's host memory reached "
        "1300 MiB, over the limit of 1200 MiB; use a smaller batch"
    )
    text = str(BaselineFailed(RunOutcome("out_of_memory", None, 1300.0, (), 0, error=error)))
    assert text.startswith("the baseline run ran out of memory: the memory guard ended the run")
    assert "out of memory: out of memory" not in text and text.count("out of memory") == 1


@pytest.mark.slow
def test_an_lbfgs_step_that_outgrows_the_profile_budget_keeps_a_partial_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "STEPWISE_PROFILE_BUDGET_MB", "240"
    )  # the limit this test sets: the profile's cost
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    handle, result = launch(
        [sys.executable, str(LBFGS)], RunStore(tmp_path / "runs"), steps=2, timeout_s=300
    )
    run_dir = Path(handle.run_dir)
    assert result.status is RunStatus.OK, result.error
    assert result.profile_cut is not None and "the profiler's events outgrew" in result.profile_cut
    assert any("the profiler's events outgrew" in w for w in result.warnings)
    traces = list((run_dir / "tb").glob("*.pt.trace.json.gz"))
    assert traces, "the trace so far was not kept"
    rows = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r.get("profile_cut")] == [
        2
    ]  # cut inside the first profiled step
    assert (
        result.peak_memory_unprofiled_mb is not None and result.peak_memory_profiled_mb is not None
    )
    assert (
        result.peak_memory_profiled_mb
        > result.peak_memory_unprofiled_mb + 240 / memory_guard.FINALISE_FACTOR
    )
    progress = json.loads((run_dir / "progress.json").read_text())
    assert progress["status"] == "ok" and progress["phase"] == "cut"
    diagnosis = diagnose(observe_run(run_dir))
    said = " ".join(f"{f.rule} {f.message} {f.fix_id}" for f in diagnosis.findings).lower()
    assert "mem002" not in said and not any(a in said for a in BATCH_ADVICE), said
    assert os.path.getsize(traces[0]) > 0


def test_the_profiles_budget_follows_what_is_free(tmp_path: Path) -> None:
    """Issue 42: minGPT and llm.c rounds were all "not profiled whole": a 726 MiB tree (4 DataLoader workers)
    against 621 MiB allowed, with ~16 GB free. The budget is the room the limit leaves above the unprofiled peak."""
    _agent(tmp_path)
    guard = MemoryGuard(tmp_path, {"STEPWISE_MEMORY_LIMIT_MB": "12000"})  # 75% of 16 GB free
    guard.observe(519.0, {"phase": "unprofiled", "step": 4})
    assert guard.profile_limit_mb() == pytest.approx(
        519.0 + (12000.0 - 519.0) / memory_guard.FINALISE_FACTOR
    )
    guard.observe(726.0, {"phase": "profiling", "step": 6})
    assert guard.cut is None and guard.trip is None
    tight = MemoryGuard(
        tmp_path, {"STEPWISE_MEMORY_LIMIT_MB": "1000"}
    )  # little free: little budget
    tight.observe(519.0, {"phase": "unprofiled", "step": 4})
    tight.observe(726.0, {"phase": "profiling", "step": 6})
    assert tight.cut is not None and tight.cut.limit_mb == pytest.approx(519.0 + 481.0 / 10)
    # STEPWISE_PROFILE_BUDGET_MB sets less than what is free, never more
    assert (
        memory_guard.profile_budget_mb({"STEPWISE_PROFILE_BUDGET_MB": "240"}, 519.0, 12000.0)
        == 240.0
    )
    assert (
        memory_guard.profile_budget_mb({"STEPWISE_PROFILE_BUDGET_MB": "9000"}, 519.0, 1000.0)
        == 481.0
    )
