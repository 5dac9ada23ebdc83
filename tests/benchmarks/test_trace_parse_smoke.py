"""Smoke test of benchmarks/trace_parse.py: the synthetic Kineto generator and the table, at a tiny size.

No timing is asserted (CI machines are shared): only that the generated trace is what it claims to be, that
Stepwise reads exactly the events and steps it holds, and that the benchmark runs end to end without HTA.
The entry script imports its ``benchmarks/trace_parse_*`` modules by name: loaded by path (here), run as a
script (its children) and imported as ``benchmarks.trace_parse`` (``benchmarks/dashboard.py``) must all work.
"""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

from profilers.trace.breakdown import breakdown
from profilers.trace.load import load_trace

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "trace_parse.py"


@pytest.fixture(scope="module")
def tp():
    spec = importlib.util.spec_from_file_location("stepwise_bench_trace_parse", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def small(tp, tmp_path_factory):
    path = tmp_path_factory.mktemp("synth") / "rank0.pt.trace.json"
    info = tp.generate_kineto_trace(path, 3_000_000, layers=4, micro_batches=2)
    return path, info


def test_generated_trace_is_kineto_shaped(small):
    path, info = small
    raw = path.read_bytes()
    assert info.bytes == len(raw)
    assert 3_000_000 <= info.bytes < 3_600_000  # whole steps until the target is reached
    assert info.steps >= 3
    assert raw.startswith(b'{\n  "schemaVersion": 1,\n  "deviceProperties": [')
    assert b'},\n  {\n    "ph": "X"' in raw  # Kineto's own layout: one event over a few lines
    doc = orjson.loads(raw)
    assert doc["distributedInfo"]["world_size"] == 8 and doc["distributedInfo"]["rank"] == 0
    assert len(doc["deviceProperties"]) == 8
    events = doc["traceEvents"]
    by_ph: dict[str, int] = {}
    for e in events:
        by_ph[e["ph"]] = by_ph.get(e["ph"], 0) + 1
    assert by_ph["X"] == info.complete_events
    assert by_ph["s"] + by_ph["f"] == info.flow_events
    assert by_ph["i"] == info.memory_events + 1  # + "Record Window End"
    assert by_ph["M"] == info.metadata_events
    cats: dict[str, int] = {}
    for e in events:
        if e["ph"] == "X":
            cats[e["cat"]] = cats.get(e["cat"], 0) + 1
    assert cats["kernel"] == info.kernels and cats["cuda_runtime"] == info.runtime
    assert cats["gpu_memcpy"] == info.memcpy and cats["gpu_memset"] == info.memset
    assert cats["cpu_op"] == info.cpu_ops and cats["user_annotation"] == info.user_annotations
    steps = [e["name"] for e in events if e["ph"] == "X" and e["name"].startswith("ProfilerStep#")]
    assert len(steps) == 2 * info.steps  # host span + its gpu_user_annotation twin
    # Every GPU activity links to exactly one runtime launch by correlation id.
    launches = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime"}
    device = [
        e["args"]["correlation"]
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    assert len(set(device)) == len(device) and set(device) <= launches
    assert any("nccl" in e["name"] for e in events if e.get("cat") == "kernel")


def test_generator_is_deterministic(tp, small, tmp_path):
    path, info = small
    again = tmp_path / path.name  # the name is written into the file (traceName)
    info2 = tp.generate_kineto_trace(again, 3_000_000, layers=4, micro_batches=2)
    assert hashlib.sha256(again.read_bytes()).digest() == hashlib.sha256(path.read_bytes()).digest()
    assert (info2.steps, info2.complete_events) == (info.steps, info.complete_events)


def test_stepwise_reads_exactly_what_was_generated(small):
    path, info = small
    trace = load_trace(path)
    assert len(trace.events) == info.complete_events
    assert len(trace.memory) == info.memory_events
    assert not trace.steps_inferred and len(trace.steps) == info.steps
    assert trace.ranks == (0,) and trace.world_size == 8 and trace.backend == "nccl"
    kinds = trace.events["kind"].value_counts()
    assert kinds["kernel"] == info.kernels and kinds["runtime"] == info.runtime
    assert kinds["gpu_annotation"] == info.gpu_annotations == info.steps
    b = breakdown(trace)
    assert b.n_steps == info.steps and b.device == "gpu"
    assert sum(b.shares().values()) == pytest.approx(1.0, abs=1e-9)
    assert (
        b.comm_total_ns > b.comm_overlapped_ns > 0
    )  # NCCL overlaps compute, the last bucket is exposed
    assert b.share("dataloader") > 0 and b.gpu_busy_share > 0.3
    assert (b.per_step["step_ns"].to_numpy() > 0).all() and np.isfinite(b.step_time_ms)


@pytest.mark.slow  # ~3 s of child processes: the full suite runs it, the fast lane keeps the table and generator tests
def test_benchmark_runs_end_to_end_without_hta(tp, tmp_path, capsys):
    out_json = tmp_path / "result.json"
    rc = tp.main(
        [
            "--synthetic-gb",
            "0.002",
            "--skip-hta",
            "--skip-shared",
            "--repeats",
            "1",
            "--layers",
            "2",
            "--micro-batches",
            "1",
            "--workdir",
            str(tmp_path),
            "--json",
            str(out_json),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    for line in (
        "Stepwise load+breakdown: time",
        "Stepwise analyze, whole process: time",
        "orjson.loads, gc off: time",
        "HTA / Stepwise time",
        "Stepwise / orjson gc off",
        "Stepwise peak / JSON size",
    ):
        assert line in out
    assert "did not finish" not in out and "skipped" not in out  # HTA rows are left out, not failed
    assert out_json.exists()
    assert not list(tmp_path.glob("stepwise-bench-*/*.json"))  # the generated trace is cleaned up


def test_table_reports_a_contender_that_did_not_finish(tp):
    res = tp.InputResult("synthetic 1.00 GB", "x.json", 10**9, 10**9)
    ok = tp.Run(
        True,
        20.0,
        21.0,
        600 * 2**20,
        "",
        {
            "events": 5,
            "load_s": 19.0,
            "breakdown_s": 1.0,
            "steps": 3,
            "ranks": [0],
            "gpu_busy_share": 0.9,
            "rss_after_import": 100 * 2**20,
            "import_s": 1.0,
        },
    )
    res.runs = {
        "stepwise": [ok],
        "orjson": [
            tp.Run(
                True, 10.0, 11.0, 7 * 10**9, "", {"events": 9, "read_s": 1.0, "rss_after_import": 1}
            )
        ],
        "hta": [tp.Run(False, None, 600.0, 15 * 10**9, "time limit of 600 s reached")],
    }
    table = tp.render([res])
    assert "did not finish: time limit of 600 s reached" in table
    assert "2.00x  MET" in table  # Stepwise / orjson
    assert "0.63x  MET" in table  # peak / size


def test_whole_process_ratio_is_judged_against_the_target_of_its_input(tp):
    def runs(seconds: list[float], cpu: float) -> list:
        return [tp.Run(True, s, s, 2**20, "", {"cpu_s": cpu}) for s in seconds]

    big = tp.InputResult("synthetic 1.00 GB", "x.json", 10**9, 10**9)
    big.runs = {
        "stepwise_process": runs([10.0, 12.0, 11.0], 10.0),
        "hta_process": runs([200.0], 190.0),
    }
    small = tp.InputResult("shared", "y.json.gz", 3 * 2**20, 51 * 2**20)
    small.runs = {"stepwise_process": runs([1.0, 1.2, 1.1], 1.0), "hta_process": runs([6.0], 5.0)}
    line = next(
        ln
        for ln in tp.render([small, big]).splitlines()
        if ln.startswith("HTA / Stepwise, whole process")
    )
    assert (
        "5.45x  MET" in line and "18.18x  MISSED" in line
    )  # 6 / 1.1 against 5x; 200 / 11 against 20x


def test_entry_imports_as_a_package_module_too():
    """``benchmarks/dashboard.py`` does ``from benchmarks.trace_parse import generate_kineto_trace``."""
    repo = BENCH.parents[1]
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from benchmarks.trace_parse import generate_kineto_trace, main; print(generate_kineto_trace.__name__)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(repo)], capture_output=True, text=True, cwd=repo
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "generate_kineto_trace"
