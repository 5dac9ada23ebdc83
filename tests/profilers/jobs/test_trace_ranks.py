"""Summaries at capture time: under torchrun every rank writes its per-step summary, only the ranks asked keep a
full trace (``launch --trace-ranks``), and ``analyze`` of the run names every rank's step time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.advisors import main as advisors_main
from cli.profilers import main as profilers_main
from profilers.jobs.agent_summaries import read_agent_summaries, traced_ranks
from stepwise_agent.rank_summary import COMM, parse_trace_ranks, summarise_events

TWO_RANKS = """
import time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 64))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1000):
    if rank == 1:
        time.sleep(0.03)  # rank 1 is the straggler: rank 0 waits in the all-reduce
    model(torch.randn(16, 64)).sum().backward()
    opt.step()
    opt.zero_grad()
"""


@pytest.mark.slow
def test_trace_ranks_0_under_torchrun_keeps_summaries_for_both_and_a_trace_for_rank_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "train.py").write_text(TWO_RANKS)
    code = profilers_main(
        [
            "launch",
            "--steps",
            "3",
            "--nproc-per-node",
            "2",
            "--trace-ranks",
            "0",
            "--json",
            "--store",
            str(tmp_path / "runs"),
            "--",
            "python",
            str(tmp_path / "train.py"),
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    run_dir = Path(out["run_dir"])
    assert sorted(read_agent_summaries(run_dir)) == [0, 1]
    assert traced_ranks(run_dir) == [0]
    assert advisors_main(["analyze", str(run_dir), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    job = doc["job"]
    assert job["ranks"] == [0, 1] and job["traced_ranks"] == [0]
    step_ms = {r["rank"]: r["step_ms"] for r in job["per_rank"]}
    assert set(step_ms) == {0, 1} and all(v > 0 for v in step_ms.values())
    assert job["straggler"]["culprit"] == 1  # the sleeping rank: most work outside its collectives
    assert len(job["step_ms"]) == 2 and all(len(row) == 3 for row in job["step_ms"])
    # the advisor judges the straggler from both ranks' summaries, though only rank 0's trace was kept
    named = [
        f
        for lead in doc["findings"]
        for f in (lead, *lead.get("rules", []))
        if f["rule"] == "COMM003"
    ]
    assert (
        named
        and named[0]["evidence"]["straggler_rank"] == 1
        and named[0]["evidence"]["ranks_summarised"] == 2
    )


class _Range:
    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end


class _Event:
    def __init__(self, name: str, start: float, end: float) -> None:
        self.name, self.time_range = name, _Range(start, end)


def test_a_summary_splits_each_step_into_collectives_and_work() -> None:
    events = [
        _Event("ProfilerStep#3", 0, 100),
        _Event("aten::mm", 5, 40),
        _Event("gloo:all_reduce", 40, 90),
        _Event("c10d::allreduce_", 45, 95),
        _Event("ProfilerStep#4", 100, 150),
        _Event("aten::mm", 100, 150),
    ]
    s = summarise_events(events, rank=3, world_size=4)
    assert [(r["step"], r["step_us"], r["comm_us"], r["work_us"]) for r in s["steps"]] == [
        (3, 100, 55, 45),
        (4, 50, 0, 50),
    ]
    assert {c["name"]: c["count"] for c in s["collectives"]} == {
        "gloo:all_reduce": 1,
        "c10d::allreduce_": 1,
    }


def test_trace_ranks_values() -> None:
    assert parse_trace_ranks(None) is None and parse_trace_ranks("slowest") == "slowest"
    assert parse_trace_ranks("7,0") == [0, 7] and parse_trace_ranks([3]) == [3]


def test_the_agents_collective_pattern_covers_the_analysts() -> None:
    from profilers.trace.kernel_classes import COMM_KERNEL, COMM_OP

    for name in (
        "gloo:all_reduce",
        "c10d::allreduce_",
        "nccl:all_reduce",
        "record_param_comms",
        "barrier",
        "ncclKernel_AllReduce_RING_LL_Sum_float",
        "ncclDevKernel_SendRecv",
        "alltoall_base",
    ):
        assert bool(COMM.search(name)) == bool(COMM_OP.search(name) or COMM_KERNEL.search(name)), (
            name
        )


def test_slowest_keeps_the_trace_of_the_rank_with_most_work_only(tmp_path: Path) -> None:
    from stepwise_agent.rank_summary import keeps_trace, write_summary

    def steps(work: float, comm: float) -> list[dict]:
        return [
            {"step": s, "start_us": 0.0, "step_us": work + comm, "comm_us": comm, "work_us": work}
            for s in range(3)
        ]

    for rank, (work, comm) in enumerate([(50.0, 40.0), (90.0, 1.0), (52.0, 38.0)]):
        write_summary(tmp_path, {"rank": rank, "world_size": 3, "steps": steps(work, comm)})
    kept = [r for r in range(3) if keeps_trace(tmp_path, r, 3, "slowest", wait_s=1.0)]
    assert kept == [1]
    assert [r for r in range(3) if keeps_trace(tmp_path, r, 3, [0, 2])] == [0, 2]
    assert all(keeps_trace(tmp_path, r, 3, None) for r in range(3))


def test_slowest_keeps_the_trace_when_no_other_rank_is_in_sight(tmp_path: Path) -> None:
    from stepwise_agent.rank_summary import keeps_trace, write_summary

    write_summary(tmp_path, {"rank": 5, "world_size": 8, "steps": []})
    assert keeps_trace(tmp_path, 5, 8, "slowest", wait_s=0.1)
