"""The sample workloads run for real (slow), as ``stepwise run`` runs them: their training script under the launcher
and its agent — one and two gloo ranks, two nodes, a memory budget, a crash, a kill — each leaving a stored,
honest run: every step, the trace, telemetry, the TensorBoard scalars and each rank's own step time."""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

import pytest
import torch

from cli.workloads import workload_spec
from profilers.run.handle import RunHandle, follow
from profilers.run.launch import start_script
from profilers.run.records import RunStatus
from profilers.run.tb_export import STEP_SCALARS
from profilers.store.runs import RunStore
from sample_runs.base import (
    BuildContext,
    Parts,
    Size,
    Workload,
    cross_entropy,
    teacher_classification,
)

REPO = Path(__file__).resolve().parents[2]
WAIT_S = (
    300.0  # generous upper bound for a tiny run on a loaded 2-core machine (not a timing assertion)
)
pytestmark = pytest.mark.slow
_STARTED: list[RunHandle] = []


@pytest.fixture(autouse=True)
def _stop_what_a_failed_test_left() -> Iterator[None]:
    yield
    while _STARTED:
        handle = _STARTED.pop()
        handle.cancel("test teardown")
        handle.join(WAIT_S)


def start(store: RunStore, name: str, **kw: Any) -> RunHandle:
    env = kw.pop("env", None)
    handle = start_script(workload_spec(store.root, name, **kw), store, label=name, extra_env=env)
    _STARTED.append(handle)
    return handle


def _traces(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "tb").glob("rank*.pt.trace.json.gz"))


def _wait_for_step(handle: RunHandle, step: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while ((handle.progress() or {}).get("step") or 0) < step:
        assert time.monotonic() < deadline and not handle.poll().finished, (
            "the run never got that far"
        )
        time.sleep(0.05)


def test_a_tiny_run_leaves_every_file_and_its_time_per_step_is_that_of_its_steady_steps(
    tmp_path: Path,
) -> None:
    store = RunStore(tmp_path)
    seen: list[dict[str, Any]] = []
    handle = start(store, "compute_bound")
    result = follow(handle, seen.append, WAIT_S)
    assert result.status is RunStatus.OK and result.error is None, result.error
    run_dir = handle.run_dir
    rows = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert (
        result.steps_done == len(rows) == 12
        and len(_traces(run_dir)) == 1
        and seen
        and seen[-1]["step"] >= 1
    )
    # the run's one step time: the timed steps (past the 3 of warm-up, before the profiler's warm-up step)
    timed = [r["wall_ms"] for r in rows if 3 <= r["step"] < 8]
    assert not any(r["profiled"] for r in rows if r["step"] < 9) and all(
        r["profiled"] for r in rows[9:]
    )
    assert result.step_time_steps == 5 and result.step_time_basis == "steady"
    assert result.step_time_ms == pytest.approx(
        sum(timed) / len(timed), abs=1e-4
    )  # elapsed ÷ steps
    assert result.typical_step_ms == pytest.approx(statistics.median(timed), abs=1e-4)
    assert (
        store.get(handle.run_id).step_time_ms == result.step_time_ms
    )  # the index holds the same number
    assert all(r["samples"] == 128 and 0 < r["data_ms"] <= r["wall_ms"] for r in rows), (
        rows
    )  # batches drawn
    stored = json.loads((run_dir / "result.json").read_text())
    assert stored["rank_step_time_ms"] == [pytest.approx(result.step_time_ms, abs=1e-3)]
    assert stored["slowest_rank"] == 0 and stored["node_rank"] == 0
    assert (run_dir / "telemetry.jsonl").stat().st_size > 0 and list(
        (run_dir / "tb").glob("events.out.*")
    )
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scalars = EventAccumulator(str(run_dir / "tb")).Reload().Tags()["scalars"]
    assert set(STEP_SCALARS) <= set(scalars)


def test_a_flag_that_cannot_act_here_is_a_warning_of_the_run(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    result = follow(start(store, "digits", values={"tf32": True}), None, WAIT_S)
    assert result.status is RunStatus.OK
    assert (
        "the script warned: UserWarning: tf32=True has no effect on cpu (CUDA only); ignored"
        in result.warnings
    )


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


def _build_failing(params: Mapping[str, Any], ctx: BuildContext, rank: int) -> Parts:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return Parts(model=model, dataset=_FailingData(params["ok_items"]), loss_fn=cross_entropy)


FAILING = Workload(
    name="failing",
    description="raises after a few steps (tests only)",
    intended_bottleneck=None,
    default_params={"ok_items": 32},
    sizes={"tiny": Size(params={}, settings={"batch_size": 8})},
    builder=_build_failing,
)


def test_a_workload_that_raises_is_failed_with_its_steps(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    env = {"PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    handle = start(store, f"{__name__}:FAILING", env=env, allow_external=True)
    result = follow(handle, None, WAIT_S)
    assert result.status is RunStatus.FAILED and "broke on purpose" in (result.error or "")
    assert result.steps_done == 4 and len(store.read_steps(handle.run_id)) == 4


def test_a_memory_budget_breach_is_out_of_memory(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    result = follow(start(store, "compute_bound", values={"memory_budget_mb": 64}), None, WAIT_S)
    assert result.status is RunStatus.OUT_OF_MEMORY and "memory guard" in (result.error or "")
    assert "limit of 64 MiB" in (result.error or "")


def test_sigkill_of_a_real_run_keeps_its_steps(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    handle = start(store, "compute_bound", steps=10_000)
    _wait_for_step(handle, 3)
    os.kill(handle.pid, signal.SIGKILL)  # type: ignore[arg-type]
    result = handle.wait(WAIT_S)
    assert result.status is RunStatus.KILLED and "SIGKILL" in (result.error or "")
    assert result.steps_done >= 3 and len(store.read_steps(handle.run_id)) >= 3


def test_two_real_runs_at_once_share_one_store_and_lose_nothing(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    handles = [start(store, name) for name in ("compute_bound", "digits")]
    results = [h.wait(WAIT_S) for h in handles]
    assert [r.status for r in results] == [RunStatus.OK, RunStatus.OK], [r.error for r in results]
    assert {r.run_id for r in store.list()} == {h.run_id for h in handles}
    for h in handles:
        assert len(store.read_steps(h.run_id)) == 12 and len(_traces(h.run_dir)) == 1


def test_two_gloo_ranks_with_no_sync_and_bf16_compression_end_ok_with_each_ranks_step_time(
    tmp_path: Path,
) -> None:
    store = RunStore(tmp_path)
    handle = start(
        store,
        "communication_bound",
        values={"grad_accum_steps": 2, "ddp_no_sync": True, "grad_compression": "bf16"},
    )
    result = follow(handle, None, WAIT_S)
    assert result.status is RunStatus.OK, result.error
    assert [p.name.split(".")[0] for p in _traces(handle.run_dir)] == ["rank0", "rank1"]
    steps = store.read_steps(handle.run_id)
    assert sorted(steps["rank"].unique()) == [0, 1] and result.steps_done == 12
    stored = json.loads((handle.run_dir / "result.json").read_text())
    assert len(stored["rank_step_time_ms"]) == 2 and stored["slowest_rank"] in (0, 1)
    assert (handle.run_dir / "ranks").is_dir()  # every rank's output, kept


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_nodes_each_run_the_same_command_and_keep_their_own_folder(tmp_path: Path) -> None:
    """Two "machines" on this one: two launches, two stores, one c10d rendezvous, one rank each. Each node's
    folder holds its own rank's steps and trace, and each ends ok — also the node without rank 0."""
    values = {
        "world_size": 2,
        "nnodes": 2,
        "rdzv_endpoint": f"127.0.0.1:{_free_port()}",
        "backend": "gloo",
        "device": "cpu",
    }
    stores = [RunStore(tmp_path / "node_a"), RunStore(tmp_path / "node_b")]
    handles = [start(store, "communication_bound", values=values) for store in stores]
    results = [h.wait(WAIT_S) for h in handles]
    assert [r.status for r in results] == [RunStatus.OK, RunStatus.OK], [r.error for r in results]
    ranks = []
    for store, handle in zip(stores, handles):
        steps = store.read_steps(handle.run_id)
        (rank,) = steps["rank"].unique()
        assert sorted(steps["step"]) == list(range(12))
        assert [p.name.split(".")[0] for p in _traces(handle.run_dir)] == [f"rank{rank}"]
        stored = json.loads((handle.run_dir / "result.json").read_text())
        assert stored["node_rank"] in (0, 1) and len(stored["rank_step_time_ms"]) == 2
        ranks.append(int(rank))
    assert sorted(ranks) == [0, 1]
