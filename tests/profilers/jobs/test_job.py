"""A job's traces as map and reduce (profilers.jobs.rank_summary → profilers.jobs.reduce): the per-rank summaries
reduce to the very analysis that reading every rank's events at once gives, on every shared multi-rank trace."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from advisors.analysis.build import trace_analysis
from advisors.observation import observe
from cli.advisors import analyze
from profilers.jobs.rank_summary import cache_dir, summary_bytes
from profilers.trace.load import load_trace
from profilers.trace.sources import SUMMARY_CACHE_DIR, find_trace_files
from tests.job_factory import STRAGGLER, planted_job

COMM = Path(__file__).resolve().parents[3].parent / "shared" / "traces" / "communication"
JOBS = [COMM / "param_dlrm_8_ranks", COMM / "hta_sampled_128_ranks"]


def _whole(path: Path) -> dict:
    """Today's analysis: every rank's events loaded at once, one breakdown."""
    return trace_analysis(load_trace(path), path.name, charts=False).to_json()


@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.name)
def test_summaries_reduce_to_the_whole_analysis(job: Path) -> None:
    out = analyze(str(job))
    views = out.pop("job")
    whole = _whole(job)
    assert out == whole  # breakdown, per-rank table, straggler, kernels, findings: all of it
    assert whole["straggler_reason"] and views["straggler_reason"] == whole["straggler_reason"]
    assert (
        views["straggler"] is None and whole["straggler"] is None
    )  # neither shared job has one beyond the noise
    assert views["ranks"] == whole["ranks"]
    by_rank = {r["rank"]: r["step_ms"] for r in whole["per_rank"]}
    for rank, row in zip(
        views["ranks"], views["step_ms"]
    ):  # the heat map's rows are each rank's steps
        assert (
            sorted(row)[len(row) // 2] == pytest.approx(by_rank[rank], abs=1e-3)
            or len(row) % 2 == 0
        )
    assert views["collectives"] and all(
        c["exposed_ms"] <= c["total_ms"] + 1e-9 for c in views["collectives"]
    )


def test_a_planted_straggler_has_victims_that_wait_on_it(tmp_path: Path) -> None:
    folder = planted_job(tmp_path / "job")
    out = analyze(str(folder))
    views = out.pop("job")
    assert out == _whole(
        folder
    )  # the reduce gives what loading every rank gives, straggler and all
    s = views["straggler"]
    assert s["culprit"] == STRAGGLER == out["straggler"]["rank"] and len(s["victims"]) == 3
    assert views["straggler_reason"] == out["straggler_reason"] and out[
        "straggler_reason"
    ].startswith(f"Straggler: rank {STRAGGLER} works ")
    exposed = {r: row for r, row in zip(views["ranks"], views["exposed_comm_ms"])}
    for v in s["victims"]:  # a victim waits longer in its collectives than the culprit does
        assert min(exposed[v["rank"]]) > max(exposed[s["culprit"]])


def test_the_straggler_s_extra_work_is_named_by_category_kernel_and_operator(
    tmp_path: Path,
) -> None:
    """The planted straggler's kernels run 1.3 times as long: the view says in what, each figure the culprit's
    per-step mean against the median of the other ranks' (read here from the whole analysis' per-rank
    categories, an independent path)."""
    folder = planted_job(tmp_path / "job")
    extra = analyze(str(folder))["job"]["straggler"]["extra_work"]
    cats = {c["category"]: c for c in extra["categories"]}
    assert (
        extra["categories"][0]["category"] == "gpu_compute"
        and cats["gpu_compute"]["extra_ms"] > 0.5
    )
    assert all(
        c["extra_ms"] == pytest.approx(c["culprit_ms"] - c["others_median_ms"], abs=1e-3)
        for c in extra["categories"]
    )
    whole = observe(folder).breakdown
    assert whole is not None
    per = whole.per_step.groupby("rank")["gpu_compute"].mean() / 1e6
    others = per.drop(STRAGGLER)
    assert cats["gpu_compute"]["culprit_ms"] == pytest.approx(per[STRAGGLER], abs=1e-3)
    assert cats["gpu_compute"]["others_median_ms"] == pytest.approx(
        float(others.median()), abs=1e-3
    )
    assert extra["kernels"] and all(k["extra_ms"] > 0 for k in extra["kernels"])
    assert "communication" not in cats  # the others' waiting is not the culprit's work


def test_a_summary_is_small(tmp_path: Path) -> None:
    from profilers.jobs.rank_summary import summarise_file

    f = find_trace_files(JOBS[1])[0]
    assert f.path is not None
    summary = summarise_file(f, 0)
    assert summary_bytes(summary) < min(f.path.stat().st_size, 2 * 1024**2)


def test_summaries_are_cached_in_the_users_cache_by_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache is Stepwise's own (here the user's cache folder under a fake home): the folder of traces is
    never written to, and a copy of the same bytes elsewhere reads the same summaries."""
    monkeypatch.delenv("STEPWISE_SUMMARY_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    job = tmp_path / "job"
    shutil.copytree(JOBS[0], job)
    for p in job.iterdir():
        p.chmod(0o644)
    job.chmod(0o755)
    before = sorted(p.name for p in job.iterdir())
    first = analyze(str(job))
    assert first["job"]["summaries_cached"] == 0
    assert cache_dir() == tmp_path / "home" / ".cache" / "stepwise" / "rank-summaries"
    assert len(list(cache_dir().iterdir())) == 8
    assert sorted(p.name for p in job.iterdir()) == before  # nothing written beside the traces
    assert (
        analyze(str(shutil.copytree(job, tmp_path / "elsewhere")))["job"]["summaries_cached"] == 8
    )
    second = analyze(str(job))
    assert second["job"].pop("summaries_cached") == 8
    first["job"].pop("summaries_cached")
    assert second == first
    # A file whose bytes change is summarised again; the others still come from the cache.
    target = job / "worker3.pt.trace.json.gz"
    target.write_bytes(gzip.compress(gzip.decompress(target.read_bytes()), compresslevel=1))
    third = analyze(str(job))
    assert third["job"].pop("summaries_cached") == 7
    assert third == first


def test_a_read_only_trace_folder_is_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", str(tmp_path / "cache"))
    job = tmp_path / "job"
    shutil.copytree(JOBS[0], job)
    job.chmod(0o555)
    try:
        assert analyze(str(job))["job"]["summaries"] == 8
        assert (
            not (job / SUMMARY_CACHE_DIR).exists()
            and len(list((tmp_path / "cache").iterdir())) == 8
        )
    finally:
        job.chmod(0o755)


def test_forked_map_workers_give_the_same_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPWISE_MAP_WORKERS", "2")
    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", "off")
    forked = analyze(str(JOBS[0]))
    monkeypatch.setenv("STEPWISE_MAP_WORKERS", "1")
    assert analyze(str(JOBS[0])) == forked


def _raw_message_bytes(job: Path, op: str) -> tuple[int, int, int]:
    """Straight from the rank files' JSON, the calls of host op ``op`` inside a ProfilerStep, how many carry
    shapes, and their first inputs' bytes: what the summaries must add up to."""
    import json

    per_type = {"float": 4, "c10::BFloat16": 2, "c10::Half": 2, "long int": 8, "int": 4}
    calls = sized = total = 0
    for f in sorted(job.iterdir()):
        events = json.loads(gzip.decompress(f.read_bytes()))["traceEvents"]
        steps = [
            (e["ts"], e["ts"] + e["dur"])
            for e in events
            if str(e.get("name", "")).startswith("ProfilerStep#")
        ]
        for e in events:
            if e.get("name") != op or not any(a <= e["ts"] < b for a, b in steps):
                continue
            calls += 1
            args = e.get("args") or {}
            dims, types = args.get("Input Dims"), args.get("Input type")
            if dims and types and types[0] in per_type:
                n = 1
                for d in dims[0]:
                    n *= d
                sized += 1
                total += n * per_type[types[0]]
    return calls, sized, total


def test_collectives_carry_their_message_sizes_from_the_trace() -> None:
    """The 128-rank sample's NCCL annotations record Input Dims: all_reduce moves ~78 MB a call; all_to_all is
    timed by its SendRecv kernels; the V100 trace's annotations have no shapes, and say so (sized 0)."""
    from profilers.jobs.collectives import collective_kind

    job = JOBS[1]
    sizes = {r["kind"]: r for r in analyze(str(job))["job"]["collective_sizes"]}
    calls, sized, total = _raw_message_bytes(job, "nccl:all_reduce")
    assert (
        sizes["allreduce"]["calls"],
        sizes["allreduce"]["sized_calls"],
        sizes["allreduce"]["bytes"],
    ) == (calls, sized, total) and total > 0
    assert sizes["allreduce"]["mean_message_mb"] == pytest.approx(total / sized / 1e6, rel=1e-3)
    assert sizes["alltoall"]["time_ms"] is not None  # its ncclKernel_SendRecv kernels
    v100 = analyze(str(COMM / "hta_v100_2rank_216k_events.json.gz"))
    assert "job" not in v100 or all(r["sized_calls"] == 0 for r in v100["job"]["collective_sizes"])
    assert [
        collective_kind(n)
        for n in (
            "nccl:all_reduce",
            "gloo:broadcast",
            "c10d::allreduce_",
            "ncclDevKernel_AllGather_RING_LL(x)",
            "aten::mm",
        )
    ] == ["allreduce", "broadcast", "allreduce", "allgather", None]


def test_a_report_on_many_ranks_reads_their_summaries_not_their_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``analyze FOLDER --report`` on SUMMARY_RANKS ranks or more (16; the shared 8-rank job here) writes the
    report from the ranks' summaries, as the dashboard does: no rank's events are loaded, and its JSON is the JSON
    without ``--report``."""
    from cli.advisors import _analyze_with_report
    from profilers.trace import load
    from advisors.analysis import build

    monkeypatch.setattr(build, "SUMMARY_RANKS", 8)
    plain = analyze(str(JOBS[0]))
    real = load.load_trace_files
    at_once: list[int] = []

    def one_rank_at_a_time(
        files, *a, **k
    ):  # the map reads a rank at a time; the report must not read them all
        at_once.append(len(files))
        return real(files, *a, **k)

    monkeypatch.setattr(load, "load_trace_files", one_rank_at_a_time)
    out = tmp_path / "report.html"
    doc = _analyze_with_report(str(JOBS[0]), str(out))
    html = out.read_text(encoding="utf-8")
    assert "read as 8 rank summaries" in html and plain["bottleneck"] in html
    assert doc == plain
    assert max(at_once, default=1) == 1


def test_a_folder_of_ranks_says_the_cuda_its_traces_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ranks' summaries carry each trace's ``cuda_runtime_version``: a job read through them
    records the CUDA a whole load records, and ``compare`` says it."""
    import json

    from advisors.analysis.build import analyse
    from advisors.compare.environment import environment_of

    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", str(tmp_path / "cache"))
    job = planted_job(tmp_path / "job", ranks=4)
    for f in sorted(job.glob("*.json.gz")):
        doc = json.loads(gzip.decompress(f.read_bytes()))
        doc["cuda_runtime_version"] = 12040
        f.write_bytes(gzip.compress(json.dumps(doc).encode()))
    reduced = analyse(job, charts=False, store=False)
    assert reduced.n_ranks == 4 and reduced.breakdown is not None
    assert reduced.breakdown.cuda_runtime == load_trace(job).cuda_runtime == "12.4"
    assert environment_of(reduced).cuda == "12.4"
