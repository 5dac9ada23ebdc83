"""The runner: a process that ends well, crashes, is killed or hangs always leaves a stored, honest run.

The first tests drive ``spawn`` with a small fake worker (fast, exact); the rest run real tiny workloads
through ``profilers.run.worker`` (one and two gloo ranks).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from typing import Any, Callable, Iterator, Mapping

import psutil
import pytest
import torch

from profilers.run import runner
from profilers.errors import SpecError
from profilers.run.handle import RunHandle, classify_exit, run_processes, spawn
from profilers.run.records import RunStatus
from profilers.run.spec import TrainingSpec
from profilers.store.runs import RunStore
from sample_runs.base import Parts, Size, Workload, cross_entropy, teacher_classification
from tests.fake_clock import FakeClock

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 120.0  # generous upper bound for a tiny run on a loaded 2-core machine (not a timing assertion)

FAKE_WORKER = textwrap.dedent('''
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
''')


_STARTED: list[RunHandle] = []


@pytest.fixture(autouse=True)
def _stop_what_a_failed_test_left() -> Iterator[None]:
    yield
    while _STARTED:
        handle = _STARTED.pop()
        handle.cancel("test teardown")
        handle.join(WAIT_S)


def _fake(tmp_path: Path, mode: str, hang_timeout_s: float | None = None,
          hang_clock: Callable[[], float] = time.monotonic) -> tuple[RunStore, RunHandle]:
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    store = RunStore(tmp_path / "store")
    record = store.create("run", f"fake-{mode}", spec={"workload": "fake"})
    handle = spawn(store, record.run_id, [sys.executable, str(script), record.run_dir, mode],
                   hang_timeout_s=hang_timeout_s, hang_clock=hang_clock)
    _STARTED.append(handle)
    return store, handle


def _wait_for_step(handle: RunHandle, step: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while ((handle.progress() or {}).get("step") or 0) < step:
        assert time.monotonic() < deadline and not handle.poll().finished, "the run never got that far"
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


def test_fake_worker_ok(tmp_path: Path) -> None:
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
    assert _until(lambda: run_processes(handle.run_id) == [])  # the orphaned grandchild went with it


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

    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    store = RunStore(tmp_path / "store")
    record = store.create("run", "fake-block", spec={"workload": "fake"})
    asked = threading.Thread(target=cancel_run, args=(store, record.run_id, "cancelled by you (test)"))
    asked.start()  # no pid stored yet: cancel_run waits a grace for one, the handle will see the request anyway
    time.sleep(0.1)
    handle = spawn(store, record.run_id, [sys.executable, str(script), record.run_dir, "block"])
    _STARTED.append(handle)
    result = handle.wait(WAIT_S)
    asked.join(WAIT_S)
    assert result.status is RunStatus.KILLED and result.error == "cancelled by you (test)"
    assert store.get(record.run_id).status is RunStatus.KILLED
    assert _until(lambda: run_processes(record.run_id) == [])


def test_a_stop_request_stored_by_another_process_is_honoured_by_the_watcher(tmp_path: Path) -> None:
    store, handle = _fake(tmp_path, "block")
    _wait_for_step(handle, 3)
    store.request_cancel(handle.run_id, "cancelled elsewhere")  # only the marker: no signal sent by anyone
    result = handle.wait(WAIT_S)
    assert result.status is RunStatus.KILLED and result.error == "cancelled elsewhere"
    assert result.steps_done == 3


@pytest.mark.slow  # a real process left to hang until the backstop: the fast lane keeps the runner's other stops
def test_runner_backstop_stops_a_hung_run(tmp_path: Path) -> None:
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


def test_unknown_workload_is_refused_before_anything_is_stored(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    with pytest.raises(SpecError, match="unknown workload"):
        runner.start(TrainingSpec(workload="no_such_thing"), store)
    with pytest.raises(SpecError, match="unknown workload"):
        runner.start(TrainingSpec(workload="os:system"), store)  # external code only on explicit opt-in
    assert store.list() == []


def test_worker_command_shapes() -> None:
    one = runner.worker_command(TrainingSpec(workload="w"), Path("/r"))
    assert one == [sys.executable, "-m", "profilers.run.worker", "/r"]
    two = runner.worker_command(TrainingSpec(workload="w", world_size=2), Path("/r"))
    assert two[1:4] == ["-m", "torch.distributed.run", "--nproc_per_node"] and "--standalone" in two
    multi = runner.worker_command(TrainingSpec(workload="w", world_size=2, nnodes=2,
                                               rdzv_endpoint="10.0.0.1:29400"), Path("/r"))
    assert multi[multi.index("--rdzv-endpoint") + 1] == "10.0.0.1:29400" and "--standalone" not in multi
    assert json.dumps(multi)  # plain strings only


@pytest.mark.parametrize("world_size, nnodes, per_node", [(2, 1, "2"), (4, 2, "2"), (2, 2, "1"), (6, 3, "2")])
def test_each_node_starts_its_share_of_world_size(world_size: int, nnodes: int, per_node: str) -> None:
    """world_size counts every node's ranks: torchrun's --nproc_per_node is this node's share."""
    spec = TrainingSpec(workload="w", world_size=world_size, nnodes=nnodes,
                        rdzv_endpoint="h:1" if nnodes > 1 else None)
    cmd = runner.worker_command(spec, Path("/r"))
    assert cmd[cmd.index("--nproc_per_node") + 1] == per_node and cmd[cmd.index("--nnodes") + 1] == str(nnodes)
    with pytest.raises(SpecError, match="counts the ranks of all nodes"):
        TrainingSpec(workload="w", world_size=3, nnodes=2, rdzv_endpoint="h:1")


# -- real workloads through profilers.run.worker ------------------------------------------------------------------

class _FailingData(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Serves ``ok_items`` samples, then raises: the run fails after a few good steps."""

    def __init__(self, ok_items: int) -> None:
        self.inner = teacher_classification(256, 8, 4, seed=0)
        self.ok_items, self.served = ok_items, 0

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.served += 1
        if self.served > self.ok_items:
            raise RuntimeError("the dataset broke on purpose")
        return self.inner[i]


def _build_failing(params: Mapping[str, Any], ctx: Any, rank: int) -> Parts:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return Parts(model=model, dataset=_FailingData(params["ok_items"]), loss_fn=cross_entropy)


FAILING = Workload(name="failing", description="raises after a few steps (tests only)", intended_bottleneck=None,
                   default_params={"ok_items": 32}, sizes={"tiny": Size(params={}, settings={"batch_size": 8})},
                   builder=_build_failing)
ENV = {"PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _tiny(name: str, **changes: Any) -> Any:
    import sample_runs

    return sample_runs.get_workload(name).spec(size="tiny").patch(**changes)


def _traces(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "tb").glob("rank*.pt.trace.json.gz"))


@pytest.mark.slow
def test_tiny_workload_runs_ok_with_steps_and_trace(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    seen: list[dict[str, Any]] = []
    result = runner.run(_tiny("compute_bound", steps=6), store, on_progress=seen.append, timeout_s=WAIT_S * 2)
    record = store.list()[0]
    assert result.status is RunStatus.OK and result.error is None, result.error
    assert result.steps_done == 6 and result.step_time_ms and result.samples_per_s
    assert len(store.read_steps(record.run_id)) == 6 and len(_traces(Path(record.run_dir))) == 1
    assert record.status is RunStatus.OK and record.step_time_ms == result.step_time_ms
    assert seen and seen[-1]["step"] >= 1


@pytest.mark.slow
def test_the_stored_step_time_is_the_median_of_the_steady_unprofiled_steps_of_steps_jsonl(tmp_path: Path) -> None:
    """One run, one step time: Runs, Analysis, Advisor and --json read result.json's ``step_time_ms``; it must be
    the median of the steps.jsonl rows past warm-up, outside the profiled window and not next to it."""
    import json
    import statistics

    from stepwise_agent.steady import AFTER_PROFILER, BEFORE_PROFILER

    store = RunStore(tmp_path)
    spec = _tiny("compute_bound", steps=16, warmup_steps=2, profile_wait=1, profile_warmup=1, profile_active=3)
    result = runner.run(spec, store, timeout_s=WAIT_S * 2)
    assert result.status is RunStatus.OK, result.error
    record = store.list()[0]
    rows = [json.loads(line) for line in (Path(record.run_dir) / "steps.jsonl").read_text().splitlines()]
    profiled = [r["step"] for r in rows if r["profiled"]]
    assert profiled, "the profiler collected no step"
    near = {p + d for p in profiled for d in range(-BEFORE_PROFILER, AFTER_PROFILER + 1)}
    steady = [r["wall_ms"] for r in rows if r["step"] >= 2 and r["step"] not in near]
    assert result.step_time_steps == len(steady) and result.step_time_basis == "steady"
    # steps.jsonl keeps 4 decimals of a millisecond; the result, the unrounded median
    assert result.step_time_ms == pytest.approx(statistics.median(steady), abs=1e-4)
    assert result.profiled_step_time_ms == pytest.approx(
        statistics.median(r["wall_ms"] for r in rows if r["profiled"]), abs=1e-4)
    assert record.step_time_ms == result.step_time_ms  # the index (the Runs list) holds the same number
    assert store.read_result(record.run_id).step_time_ms == result.step_time_ms
    # each step also says how long it drew batches (the data fixes' bound, timed without the profiler)
    assert all(0 < r["data_ms"] <= r["wall_ms"] for r in rows), rows


@pytest.mark.slow
def test_a_workload_that_raises_is_failed_with_its_steps(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    spec = TrainingSpec(workload=f"{__name__}:FAILING", batch_size=8, steps=20)
    result = runner.run(spec, store, timeout_s=WAIT_S * 2, extra_env=ENV, allow_external=True)
    assert result.status is RunStatus.FAILED and "broke on purpose" in (result.error or "")
    assert result.steps_done == 4 and len(store.read_steps(store.list()[0].run_id)) == 4


@pytest.mark.slow
def test_a_memory_budget_breach_is_out_of_memory(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    result = runner.run(_tiny("compute_bound", memory_budget_mb=64), store, timeout_s=WAIT_S * 2)
    assert result.status is RunStatus.OUT_OF_MEMORY and "budget" in (result.error or "")
    assert store.list()[0].status is RunStatus.OUT_OF_MEMORY


@pytest.mark.slow
def test_sigkill_of_a_real_worker_keeps_its_steps(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    handle = runner.start(_tiny("compute_bound", steps=100_000), store)
    _STARTED.append(handle)
    _wait_for_step(handle, 3)
    os.kill(handle.pid, signal.SIGKILL)  # type: ignore[arg-type]
    result = handle.wait(WAIT_S)
    assert result.status is RunStatus.KILLED and "SIGKILL" in (result.error or "")
    assert result.steps_done >= 3 and len(store.read_steps(handle.run_id)) >= 3
    assert store.get(handle.run_id).status is RunStatus.KILLED


@pytest.mark.slow
def test_two_real_runs_at_once_share_one_store_and_lose_nothing(tmp_path: Path) -> None:
    """Two users launching at the same moment: two worker processes write into one store (SQLite WAL) at
    once; both end ok with every step and their own trace, and the index lists exactly both."""
    store = RunStore(tmp_path)
    handles = [runner.start(_tiny(name, steps=5), store) for name in ("compute_bound", "data_bound")]
    _STARTED.extend(handles)
    results = [h.wait(WAIT_S * 2) for h in handles]
    assert [r.status for r in results] == [RunStatus.OK, RunStatus.OK], [r.error for r in results]
    records = {r.run_id: r for r in store.list()}
    assert set(records) == {h.run_id for h in handles}
    for h in handles:
        assert records[h.run_id].status is RunStatus.OK
        assert len(store.read_steps(h.run_id)) == 5 and len(_traces(Path(records[h.run_id].run_dir))) == 1
    assert records[handles[0].run_id].run_dir != records[handles[1].run_id].run_dir


@pytest.mark.slow
def test_two_gloo_ranks_end_ok_with_two_traces(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    result = runner.run(_tiny("communication_bound", world_size=2, steps=6), store, timeout_s=WAIT_S * 2)
    record = store.list()[0]
    assert result.status is RunStatus.OK, result.error
    assert [p.name.split(".")[0] for p in _traces(Path(record.run_dir))] == ["rank0", "rank1"]
    steps = store.read_steps(record.run_id)
    assert sorted(steps["rank"].unique()) == [0, 1] and result.steps_done == 6


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_two_nodes_each_run_the_same_command_and_keep_their_own_folder(tmp_path: Path) -> None:
    """Two "machines" on this one: two runners, two stores, one c10d rendezvous, one rank each. Each node's
    folder holds its own rank's steps and trace, and each ends ok — also the node without rank 0."""
    spec = _tiny("communication_bound", world_size=2, nnodes=2, rdzv_endpoint=f"127.0.0.1:{_free_port()}",
                 backend="gloo", device="cpu", steps=6)
    stores = [RunStore(tmp_path / "node_a"), RunStore(tmp_path / "node_b")]
    handles = [runner.start(spec, store) for store in stores]
    _STARTED.extend(handles)
    results = [h.wait(WAIT_S * 2) for h in handles]
    assert [r.status for r in results] == [RunStatus.OK, RunStatus.OK], [r.error for r in results]
    ranks = []
    for store, handle in zip(stores, handles):
        assert store.get(handle.run_id).status is RunStatus.OK
        steps = store.read_steps(handle.run_id)
        (rank,) = steps["rank"].unique()
        assert sorted(steps["step"]) == list(range(6))
        assert [p.name.split(".")[0] for p in _traces(handle.run_dir)] == [f"rank{rank}"]
        result = json.loads((handle.run_dir / "result.json").read_text())
        assert result["rank"] == rank == result["node_rank"] and len(result["rank_step_time_ms"]) == 2
        assert store.read_progress(handle.run_id)["status"] == "ok"  # type: ignore[index]
        ranks.append(int(rank))
    assert sorted(ranks) == [0, 1]


@pytest.mark.slow  # a second real process cancels: the fast lane keeps the in-process cancel tests
def test_cancel_run_from_another_process_without_a_handle(tmp_path: Path) -> None:
    from profilers.run.handle import cancel_run

    store, handle = _fake(tmp_path, "block")
    _wait_for_step(handle, 3)
    child_pid = int((handle.run_dir / "child.pid").read_text())
    code = ("import sys; from profilers.store.runs import RunStore; from profilers.run.handle import cancel_run; "
            "print(cancel_run(RunStore(sys.argv[1]), sys.argv[2]).value)")
    out = subprocess.run([sys.executable, "-c", code, str(store.root), handle.run_id], capture_output=True,
                         text=True, timeout=WAIT_S)
    assert out.stdout.strip() == "killed", out.stderr
    result = handle.wait(WAIT_S)
    assert result.status is RunStatus.KILLED and result.steps_done == 3
    assert _until(lambda: _gone(child_pid))
    assert cancel_run(store, handle.run_id) is RunStatus.KILLED  # a finished run stays as it is
