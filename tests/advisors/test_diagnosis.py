"""Diagnosis logic on synthetic inputs: ranking, ``none``, confidence margin, run folders, the CLI contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.advisors import main
from advisors.diagnosis import diagnose, diagnosis_json
from advisors.verdict import Bottleneck
from advisors.synthetic import observation, run_facts
from profilers.run.run_config import RunConfig


def test_nothing_fires_is_none() -> None:
    # a CPU step whose operators fill 45%: under COMP007's half, no loader, nothing else a rule can name
    d = diagnose(observation({"forward": 0.2, "backward": 0.25}, device="cpu"))
    assert d.bottleneck is Bottleneck.NONE and d.binding is None and d.confidence == 0.0


def test_a_gpu_busy_75_percent_with_nothing_else_at_stake_is_compute() -> None:
    # GPU idle 25% (under HOST003's 30%) and no other finding: the device's own work is what the step is made of
    d = diagnose(
        observation(
            {"gpu_compute": 0.75, "forward": 0.25}, kernels={"matmul": 0.6}, low_precision=1.0
        )
    )
    assert (
        d.bottleneck is Bottleneck.COMPUTE and d.binding is not None and d.binding.rule == "COMP007"
    )
    assert d.binding.fix_id == "torch_compile" and d.binding.severity == pytest.approx(
        0.75, abs=1e-3
    )


def test_binding_is_largest_severity() -> None:
    d = diagnose(
        observation(
            {"gpu_compute": 0.5, "dataloader": 0.12, "communication": 0.3},
            kernels={"matmul": 0.3, "communication": 0.3},
            ranks=(0, 1),
        )
    )
    assert d.bottleneck is Bottleneck.COMMUNICATION
    assert [f.severity for f in d.findings] == sorted(
        (f.severity for f in d.findings), reverse=True
    )
    assert any(f.bottleneck is Bottleneck.DATA for f in d.others)


def test_close_rival_lowers_confidence() -> None:
    clear = diagnose(observation({"gpu_compute": 0.5, "dataloader": 0.4}))
    close = diagnose(
        observation(
            {"gpu_compute": 0.3, "dataloader": 0.3, "communication": 0.28},
            kernels={"communication": 0.28},
            busy=0.9,
        )
    )
    assert clear.confidence > close.confidence


def test_heavy_but_overlapped_communication_is_not_a_bottleneck() -> None:
    d = diagnose(
        observation(
            {"gpu_compute": 0.9, "communication": 0.02},
            comm_total=0.45,
            comm_overlapped=0.43,
            kernels={"matmul": 0.5, "communication": 0.45},
            low_precision=1.0,
            ranks=(0, 1),
        )
    )
    assert d.bottleneck is not Bottleneck.COMMUNICATION


def test_out_of_memory_run_without_trace() -> None:
    d = diagnose(
        observation(
            no_trace=True,
            run=run_facts(
                "out_of_memory", peak_memory_mb=1900.0, memory_budget_mb=1536.0, steps_done=0
            ),
        )
    )
    assert d.bottleneck is Bottleneck.MEMORY and d.binding and d.binding.rule == "MEM002"
    assert d.binding.evidence["peak_memory_mb"] == 1900.0
    assert d.binding.fix_id == "grad_accumulation"


def test_out_of_memory_with_accumulation_proposes_checkpointing() -> None:
    spec = RunConfig(workload="memory_bound", batch_size=32, grad_accum_steps=2)
    d = diagnose(observation(no_trace=True, run=run_facts("out_of_memory", spec=spec)))
    assert d.binding and d.binding.fix_id == "activation_checkpointing"


def test_json_shape() -> None:
    out = diagnosis_json(diagnose(observation({"gpu_compute": 0.5, "dataloader": 0.4})))
    assert out["bottleneck"] == "data" and out["findings"]
    f = out["findings"][0]
    assert set(f) >= {"rule", "bottleneck", "severity", "message", "evidence", "fix"}
    assert set(f["fix"]) >= {"id", "title", "snippet", "spec_patch"}
    json.dumps(out)


def _run_folder(tmp_path: Path, status: str) -> Path:
    run = tmp_path / "20250101-000000-memory_bound-abcd"
    run.mkdir()
    spec = {
        "workload": "memory_bound",
        "batch_size": 64,
        "memory_budget_mb": 1024,
    }  # a run stored before
    (run / "spec.json").write_text(json.dumps(spec))
    (run / "result.json").write_text(
        json.dumps(
            {
                "status": status,
                "error": "RSS 1300 MB passed the budget",
                "steps_done": 2,
                "peak_memory_mb": 1300.0,
            }
        )
    )
    rows = [
        {"rank": 0, "step": i, "wall_ms": 50.0, "loss": 2.0 - 0.1 * i, "samples": 64}
        for i in range(2)
    ]
    (run / "steps.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return run


def test_analyze_run_folder_out_of_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_folder(tmp_path, "out_of_memory")
    assert main(["analyze", str(run), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bottleneck"] == "memory" and out["run"]["status"] == "out_of_memory"
    assert out["findings"][0]["evidence"]["peak_memory_mb"] == 1300.0
    assert out["findings"][0]["evidence"]["memory_budget_mb"] == 1024.0
    assert any("no trace" in n["reason"] for n in out["not_enough_data"])


def test_analyze_bad_input_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["analyze", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["optimize", "data_bound", "--trials", "2"], "--trials must be at least 3"),
        (["optimize", "no_such_workload"], "unknown workload"),
        (["optimize", "missing_spec.json"], "no such spec file"),
        (["optimize", "data_bound", "--rounds", "0"], "--rounds must be at least 1"),
    ],
)
def test_optimize_bad_input_is_one_error_line(
    argv: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--store", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and needle in err[0]


def test_near_capacity_outranks_a_moderate_speed_finding() -> None:
    busy_fp32 = dict(kernels={"matmul": 0.5, "elementwise": 0.2})
    at_risk = diagnose(observation({"gpu_compute": 0.8}, memory_peak=0.99, **busy_fp32))
    roomy = diagnose(observation({"gpu_compute": 0.8}, memory_peak=0.91, **busy_fp32))
    assert (
        at_risk.bottleneck is Bottleneck.MEMORY
        and at_risk.binding
        and at_risk.binding.rule == "MEM001"
    )
    assert roomy.bottleneck is Bottleneck.COMPUTE
    assert any(f.rule == "MEM001" for f in roomy.others)


def _uncached(out: dict) -> dict:
    """The output less how many rank summaries came from the cache: the first read of a job fills it."""
    if isinstance(out.get("job"), dict):
        out["job"].pop("summaries_cached", None)
    return out


@pytest.mark.parametrize(
    "rel",
    [
        "data/kineto_resnet50_num_workers_0.pt.trace.json.gz",
        "communication/param_dlrm_8_ranks",
        "memory/cs336_memory_snapshot.pickle",
    ],
)
def test_report_path_reads_once_and_prints_the_same_json(
    rel: str, shared_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``analyze --json --report`` analyses the input once (for both) and prints what ``analyze --json`` prints."""
    path = str(shared_traces / rel)
    assert main(["analyze", path, "--json"]) == 0
    plain = _uncached(json.loads(capsys.readouterr().out))
    assert main(["analyze", path, "--json", "--report", str(tmp_path / "r.json")]) == 0
    assert _uncached(json.loads(capsys.readouterr().out)) == plain
    assert (
        json.loads((tmp_path / "r.json").read_text())["diagnosis"]["bottleneck"]
        == plain["bottleneck"]
    )


def test_report_path_matches_for_a_stored_run_without_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "result.json").write_text(
        json.dumps(
            {
                "status": "out_of_memory",
                "steps_done": 0,
                "peak_memory_mb": 2100.0,
                "error": "budget",
            }
        )
    )
    assert main(["analyze", str(run_dir), "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["analyze", str(run_dir), "--json", "--report", str(tmp_path / "r.md")]) == 0
    assert json.loads(capsys.readouterr().out) == plain and plain["bottleneck"] == "memory"


def _snapshot_pickle(path: Path, reserved_gib: float, peak_gib: float, expandable: bool) -> Path:
    """A snapshot in ``_dump_snapshot``'s own layout: segments, one device's alloc/free history, settings."""
    import pickle

    gib = 1024**3
    seg = int(reserved_gib * gib / 4)
    segments = [
        {
            "device": 0,
            "address": i * seg,
            "total_size": seg,
            "allocated_size": 0,
            "active_size": 0,
            "blocks": [{"address": i * seg, "size": seg, "state": "inactive", "frames": []}],
        }
        for i in range(4)
    ]
    frames = [{"filename": "/home/u/train.py", "line": 42, "name": "forward"}]
    history = []
    for i in range(3):  # three steps, each allocating peak_gib in two blocks then freeing them
        for j in range(2):
            history.append(
                {
                    "action": "alloc",
                    "addr": (i * 2 + j) * 4096,
                    "size": int(peak_gib * gib / 2),
                    "frames": frames,
                }
            )
        for j in range(2):
            history.append(
                {
                    "action": "free_completed",
                    "addr": (i * 2 + j) * 4096,
                    "size": int(peak_gib * gib / 2),
                }
            )
    doc = {
        "segments": segments,
        "device_traces": [history],
        "allocator_settings": {"expandable_segments": expandable},
    }
    path.write_bytes(pickle.dumps(doc))
    return path


def test_fragmented_snapshot_proposes_expandable_segments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = _snapshot_pickle(
        tmp_path / "frag.pickle", reserved_gib=8.0, peak_gib=3.0, expandable=False
    )
    assert main(["analyze", str(snap), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bottleneck"] == "memory" and out["findings"][0]["rule"] == "MEM006"
    assert out["findings"][0]["fix"]["id"] == "expandable_segments"
    assert (
        out["memory_snapshot"]["peak_allocated_gib"] == 3.0
        and out["memory_snapshot"]["reserved_gib"] == 8.0
    )
    assert out["memory_snapshot"]["top_sites"][0]["where"] == "train.py:42 forward"
    already = _snapshot_pickle(
        tmp_path / "on.pickle", reserved_gib=8.0, peak_gib=3.0, expandable=True
    )
    assert main(["analyze", str(already), "--json"]) == 0
    assert "MEM006" not in {f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]}


@pytest.mark.parametrize(
    "rel",
    ["memory/cs336_memory_snapshot.pickle", "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"],
)
def test_an_uploaded_run_is_judged_as_what_was_uploaded(
    rel: str, shared_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``analyze`` on an upload's run folder reads the uploaded trace or snapshot, with or without ``--report``."""
    from profilers.store.runs import RunStore

    run_dir = RunStore(tmp_path / "runs").import_trace(shared_traces / rel).run_dir
    device = (
        ["--device-memory-gib", "14"] if rel.endswith(".pickle") else []
    )  # a snapshot's device is stated
    assert main(["analyze", run_dir, "--json", *device]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["bottleneck"] == rel.split("/")[0]
    assert main(["analyze", run_dir, "--json", *device, "--report", str(tmp_path / "r.json")]) == 0
    assert json.loads(capsys.readouterr().out) == plain
