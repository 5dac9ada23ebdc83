"""The critical path of one step of one rank (profilers.jobs.critical_graph / critical_path): the exact chain on
hand-built traces, a path that spans the step on every shared GPU trace, and job.critical_path in the folder JSON
(also when the summaries come from the cache)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli.advisors import analyze
from profilers.jobs.critical_graph import HAND_OFF, IDLE_HOST, KINDS, step_graph
from profilers.jobs.critical_path import critical_path, longest_path
from profilers.trace.load import load_trace
from profilers.trace.sources import find_trace_files

COMM = Path(__file__).resolve().parents[3].parent / "shared" / "traces" / "communication"
JOBS = [COMM / "param_dlrm_8_ranks", COMM / "hta_sampled_128_ranks"]
RANK_FILES = [f.path for job in JOBS for f in find_trace_files(job)] + [
    COMM / "hta_v100_2rank_216k_events.json.gz"
]
US = 1000


def _write(tmp_path: Path, events: list[dict]) -> Path:
    step = {
        "ph": "X",
        "cat": "user_annotation",
        "name": "ProfilerStep#1",
        "pid": 1,
        "tid": 1,
        "ts": 0,
        "dur": 100,
    }
    p = tmp_path / "trace.json"
    p.write_text(json.dumps({"traceEvents": [step, *events]}))
    return p


def _op(name: str, ts: float, dur: float, cat: str = "cpu_op", tid: int = 1, **args: int) -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def _kernel(name: str, ts: float, dur: float, correlation: int) -> dict:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": correlation},
    }


def _chain(path: Path) -> list[tuple[str, str, int, int]]:
    """The path as (kind, label, from µs, to µs), one item per edge."""
    trace = load_trace(path)
    s = trace.steps.iloc[0]
    g = step_graph(trace.events, int(s["start_ns"]), int(s["end_ns"]), "ProfilerStep#1")
    edges = longest_path(g)
    assert edges is not None
    return [
        (
            KINDS[g.kind[k]],
            g.labels[g.label[k]],
            int(g.time[g.src[k]]) // US,
            int(g.time[g.dst[k]]) // US,
        )
        for k in edges
    ]


def _launch_then_sync(kernel_us: float) -> list[dict]:
    """aten::mm launches one GEMM (at 20 µs, correlation 7); aten::item then blocks in cudaStreamSynchronize
    from 55 to 85 µs."""
    return [
        _op("aten::mm", 10, 30),
        _op("cudaLaunchKernel", 20, 5, cat="cuda_runtime", correlation=7),
        _kernel("volta_sgemm_128x64_nn", 30, kernel_us, 7),
        _op("aten::item", 50, 40),
        _op("cudaStreamSynchronize", 55, 30, cat="cuda_runtime"),
    ]


def test_a_sync_that_waits_on_a_kernel_puts_the_kernel_on_the_path(tmp_path: Path) -> None:
    """The host blocks until the GEMM ends (80 µs): the path runs host → launch → kernel → the sync's end, not
    through the host's 30 µs of waiting."""
    assert _chain(_write(tmp_path, _launch_then_sync(50))) == [
        ("idle", IDLE_HOST, 0, 10),
        ("cpu_op", "aten::mm", 10, 20),
        ("launch_wait", "launch", 20, 30),
        ("gpu_compute", "volta_sgemm_128x64_nn", 30, 80),
        ("sync_wait", "cudaStreamSynchronize", 80, 85),
        ("cpu_op", "aten::item", 85, 90),
        ("idle", IDLE_HOST, 90, 100),
    ]


def test_a_kernel_done_before_the_sync_leaves_the_path_on_the_host(tmp_path: Path) -> None:
    """The same step with a 5 µs kernel: it ends (35 µs) before the sync begins, so the sync waited on nothing
    and the step is the host's own."""
    assert _chain(_write(tmp_path, _launch_then_sync(5))) == [
        ("idle", IDLE_HOST, 0, 10),
        ("cpu_op", "aten::mm", 10, 20),
        ("cpu_op", "aten::mm", 20, 25),  # inside cudaLaunchKernel: counted under its operator
        ("cpu_op", "aten::mm", 25, 40),
        ("idle", IDLE_HOST, 40, 50),
        ("cpu_op", "aten::item", 50, 55),
        ("sync_wait", "cudaStreamSynchronize", 55, 85),
        ("cpu_op", "aten::item", 85, 90),
        ("idle", IDLE_HOST, 90, 100),
    ]


def test_work_on_another_thread_is_forked_and_joined(tmp_path: Path) -> None:
    """The step's thread sits in an annotation with no operator while autograd's thread works: the path goes
    there and back."""
    events = [
        _op("## backward ##", 10, 60, cat="user_annotation"),
        _op("autograd::engine::evaluate_function: MmBackward0", 20, 40, tid=2),
    ]
    assert _chain(_write(tmp_path, events)) == [
        ("idle", IDLE_HOST, 0, 10),
        ("idle", HAND_OFF, 10, 20),
        ("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 20, 60),
        ("idle", HAND_OFF, 60, 70),
        ("idle", IDLE_HOST, 70, 100),
    ]


def test_the_summary_adds_up_to_the_step(tmp_path: Path) -> None:
    cp = critical_path(load_trace(_write(tmp_path, _launch_then_sync(50))))
    assert cp is not None
    assert cp.step == 1 and cp.step_ms == cp.total_ms == 0.1
    assert dict(cp.by_kind) == {
        "idle": 0.02,
        "cpu_op": 0.015,
        "launch_wait": 0.01,
        "gpu_compute": 0.05,
        "sync_wait": 0.005,
    }
    assert cp.work_ms == 0.065
    assert dict(cp.cpu_ops) == {"aten::mm": 0.01, "aten::item": 0.005}


@pytest.mark.parametrize("path", RANK_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_on_real_traces_the_path_spans_the_step(path: Path) -> None:
    trace = load_trace(path)
    cp = critical_path(trace)
    assert cp is not None
    row = trace.steps[trace.steps["step"] == cp.step].iloc[0]
    assert cp.step_ms == pytest.approx((row["end_ns"] - row["start_ns"]) / 1e6, abs=1e-4)
    assert cp.total_ms == pytest.approx(cp.step_ms, abs=1e-3)
    assert sum(ms for _, ms in cp.by_kind) == pytest.approx(cp.total_ms, abs=1e-3)
    assert 0 < cp.work_ms <= cp.total_ms
    # The path is one chain of edges from the step's start to its end.
    g = step_graph(
        trace.events, int(row["start_ns"]), int(row["end_ns"]), f"ProfilerStep#{cp.step}"
    )
    edges = longest_path(g)
    assert edges is not None
    assert g.src[edges[0]] == g.source and g.dst[edges[-1]] == g.sink
    assert np.array_equal(g.dst[edges[:-1]], g.src[edges[1:]])


def test_the_folder_json_names_the_slowest_rank_s_critical_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dlrm rank 5 does the most work (not beyond the noise: no straggler is marked); its path is the one the job
    reports, from its own trace, the same when the second analyze reads every summary from the cache."""
    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", str(tmp_path / "cache"))
    job = analyze(str(JOBS[0]))["job"]
    cp = job["critical_path"]
    assert job["summaries_cached"] == 0
    assert cp["available"] and cp["rank"] == 5 and job["straggler"] is None
    assert job["straggler_reason"].startswith("Rank 5 does the most work")
    assert cp["file"] == job["files"][job["ranks"].index(5)]
    own = critical_path(load_trace(COMM / "param_dlrm_8_ranks" / cp["file"]))
    assert own is not None and cp["total_ms"] == own.total_ms and cp["step"] == own.step
    row = job["step_ms"][job["ranks"].index(5)][job["steps"].index(cp["step"])]
    assert cp["total_ms"] == pytest.approx(row, abs=1e-3)
    assert {"kind", "ms", "share"} <= set(cp["by_kind"][0]) and cp["top"]
    again = analyze(str(JOBS[0]))["job"]
    assert again["summaries_cached"] == 8
    assert again["critical_path"] == cp


def test_without_the_slowest_rank_s_trace_the_job_says_so() -> None:
    from profilers.jobs.critical_path import job_critical_path

    summaries = [
        {"file": "a.json", "critical_path": None},
        {"file": "b.json", "critical_path": {"total_ms": 1.0}},
    ]
    assert job_critical_path(summaries, [0, 1], 1)["available"] is True
    assert job_critical_path(summaries, [0, 1], 0)["available"] is False
    missing = job_critical_path(summaries, [0, 1], 7)
    assert missing["available"] is False and "needs rank 7's trace" in missing["reason"]


def _run_with_summaries(
    tmp_path: Path, traced: dict[int, Path], ranks: tuple[int, int] = (0, 1)
) -> Path:
    """A run folder as ``launch --trace-ranks`` leaves it: every rank's agent summary of three steps (the second of
    ``ranks`` works longest), the full trace of the ranks in ``traced`` only."""
    run = tmp_path / "run"
    (run / "summaries").mkdir(parents=True)
    (run / "tb").mkdir()
    for rank, work in zip(ranks, (8000, 15000)):
        steps = [
            {"step": 10 + i, "step_us": 18000, "work_us": work, "comm_us": 18000 - work}
            for i in range(3)
        ]
        (run / "summaries" / f"rank{rank}.json").write_text(
            json.dumps({"rank": rank, "steps": steps})
        )
    for rank, trace in traced.items():
        (run / "tb" / f"rank{rank}.host.pt.trace.json.gz").write_bytes(trace.read_bytes())
    return run


def test_a_run_that_kept_the_slowest_rank_s_trace_reports_its_path(tmp_path: Path) -> None:
    from profilers.jobs.agent_summaries import run_job_views

    worker5 = COMM / "param_dlrm_8_ranks" / "worker5.pt.trace.json.gz"
    views = run_job_views(_run_with_summaries(tmp_path, {1: worker5}))
    assert views is not None and views["straggler"]["culprit"] == 1
    cp = views["critical_path"]
    own = critical_path(load_trace(worker5))
    assert own is not None
    assert cp["available"] and cp["rank"] == 1 and cp["file"] == "rank1.host.pt.trace.json.gz"
    assert (cp["step"], cp["total_ms"], cp["by_kind"]) == (
        own.step,
        own.total_ms,
        own.to_json()["by_kind"],
    )
    other = run_job_views(_run_with_summaries(tmp_path / "other", {0: worker5}))
    assert other is not None
    assert other["critical_path"] == {
        "rank": 1,
        "file": None,
        "available": False,
        "reason": "needs rank 1's trace: launch with --trace-ranks 1 (or slowest)",
    }


def test_a_run_s_critical_path_comes_from_the_trace_its_analysis_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``analyze RUN`` reads the straggler's kept trace once: the critical path is taken from the trace the
    run's breakdown loaded, and equals the one read from the rank's file alone."""
    import profilers.trace.load as load_module
    from profilers.jobs.agent_summaries import run_job_views

    worker5 = (
        COMM / "param_dlrm_8_ranks" / "worker5.pt.trace.json.gz"
    )  # its distributedInfo says rank 5
    run = _run_with_summaries(tmp_path, {5: worker5}, ranks=(0, 5))
    (run / "spec.json").write_text("{}")  # marks it a run folder
    alone = run_job_views(run)
    assert (
        alone is not None
        and alone["critical_path"]["available"]
        and alone["critical_path"]["rank"] == 5
    )

    reads: list[str] = []
    real = load_module.load_trace_files

    def counted(files, source, *args, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(source)
        return real(files, source, *args, **kwargs)

    monkeypatch.setattr(load_module, "load_trace_files", counted)
    out = analyze(str(run))
    assert len(reads) == 1, (
        reads
    )  # the run's trace, for its breakdown; not the straggler's file again
    assert out["job"]["ranks"] == [0, 5] and out["job"]["traced_ranks"] == [5]
    assert out["job"]["critical_path"] == alone["critical_path"]


def test_a_report_shows_the_ranks_the_straggler_and_its_critical_path(tmp_path: Path) -> None:
    """``analyze --report`` of a folder of ranks, and of a ``--trace-ranks`` run: its Ranks section and its JSON
    export carry the same ``job`` as ``analyze --json`` (one number everywhere)."""
    from cli.advisors import _analyze_with_report

    folder = JOBS[0]
    analyze(str(folder))  # the first read fills the summary cache: both reads below come from it
    plain = analyze(str(folder))
    doc = _analyze_with_report(str(folder), str(tmp_path / "job.md"))
    assert doc["job"] == plain["job"]
    md = (tmp_path / "job.md").read_text(encoding="utf-8")
    cp = plain["job"]["critical_path"]
    assert (
        "## Ranks" in md
        and plain["job"]["straggler"] is None
        and plain["job"]["straggler_reason"] in md
    )
    assert f"Rank {cp['rank']}'s critical path, step {cp['step']}: {cp['total_ms']:.2f} ms" in md
    from profilers.jobs.path_fit import path_fit

    fit = path_fit(
        plain["job"], plain["bottleneck"]
    )  # communication over a path of host work: reconciled
    assert fit is not None and fit in md and "| host operators | " in md and "cpu_op" not in md
    _analyze_with_report(str(folder), str(tmp_path / "job.json"))
    assert json.loads((tmp_path / "job.json").read_text())["job"] == plain["job"]

    worker5 = COMM / "param_dlrm_8_ranks" / "worker5.pt.trace.json.gz"
    run = _run_with_summaries(tmp_path, {5: worker5}, ranks=(0, 5))
    (run / "spec.json").write_text("{}")
    doc = _analyze_with_report(str(run), str(tmp_path / "run.html"))
    html = (tmp_path / "run.html").read_text(encoding="utf-8")
    assert doc["job"]["ranks"] == [0, 5] and doc["job"] == analyze(str(run))["job"]
    assert (
        "2 ranks wrote a summary of every step while they trained; 1 kept a full trace (rank 5)"
        in html
    )
    _analyze_with_report(str(run), str(tmp_path / "run.md"))
    assert "| 2 × " in (tmp_path / "run.md").read_text(
        encoding="utf-8"
    )  # both ranks, though one was traced
    assert "<strong>Straggler: rank 5 works 3.50 ms per step more than the median rank" in html
    assert "Rank 5's critical path, step 10: 17.80 ms" in html
