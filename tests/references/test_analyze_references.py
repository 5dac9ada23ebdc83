"""Reference outputs: ``analyze --json`` of every shared trace (and the H100 run folders) is stored beside this
test and compared on every run, so a change that moves a verdict, a bound or a number says so here.

Refresh them on purpose, and only on purpose (TraceLens's ``--update-references``)::

    .venv/bin/python -m pytest tests/references --update-references

then read the diff of ``tests/references/analyze/`` before committing it: every changed line is a changed answer.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from cli.advisors import main

HERE = Path(__file__).resolve().parent
STORED = HERE / "analyze"
FIXTURES = HERE.parent / "fixtures" / "h100"

#: every input ``analyze`` reads among the shared traces: each file, and each folder of ranks as one job
SHARED_INPUTS = (
    "communication/hta_sampled_128_ranks",
    "communication/hta_v100_2rank_216k_events.json.gz",
    "communication/param_dlrm_8_ranks",
    "communication/param_dlrm_8_ranks/worker5.pt.trace.json.gz",
    "compute/kineto_resnet50_num_workers_4.pt.trace.json.gz",
    "compute/tracelens_gemm_01_compute_few_tiles.json",
    "data/kineto_resnet50_num_workers_0.pt.trace.json.gz",
    "data/tracelens_h100_owlv2.json.gz",
    "edge/hta_amd_mi250_rocm_minitoy.json.gz",
    "edge/hta_cpu_only_gloo_rank-34.pt.trace.json.gz",
    "edge/hta_no_rank_info.json.gz",
    "edge/hta_two_events_large_integers.pt.trace.json.gz",
    "edge/kineto_old_schema_gpu_metrics.json",
    "host/tracelens_h100_bert-small.json.gz",
    "memory/cs336_memory_snapshot.pickle",
    "memory/tracelens_elem_01_add_poor_bw.json",
    "memory/tracelens_h100_qwen1.5-0.5b.json.gz",
)
#: the run folders saved from the H100 session (benchmarks/results/gpu-2026-11-26-h100.md)
RUN_FOLDERS = ("compute_fp32", "compute_tf32", "memory_oom")


def reference_name(name: str) -> str:
    return name.replace("/", "__") + ".json"


def analyze_json(path: Path) -> dict:
    """``analyze PATH --json`` in this process; its exit code must be 0."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["analyze", str(path), "--json"])
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def check(name: str, got: dict, update: bool) -> None:
    stored = STORED / reference_name(name)
    text = json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if update:
        STORED.mkdir(exist_ok=True)
        stored.write_text(text, encoding="utf-8")
        return
    assert stored.is_file(), (
        f"no reference for {name}: run pytest tests/references --update-references"
    )
    want = json.loads(stored.read_text(encoding="utf-8"))
    if got != want:
        changed = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        pytest.fail(
            f"analyze --json of {name} changed in {changed}: if that is meant, refresh the references "
            "(pytest tests/references --update-references) and say why in the commit"
        )


@pytest.mark.parametrize("name", SHARED_INPUTS)
def test_shared_trace_answers_as_its_reference(
    name: str, shared_traces: Path, update_references: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "STEPWISE_SUMMARY_CACHE", "off"
    )  # the same answer whether a cache exists or not
    check(name, analyze_json(shared_traces / name), update_references)


@pytest.mark.parametrize("name", RUN_FOLDERS)
def test_h100_run_folder_answers_as_its_reference(
    name: str, tmp_path: Path, update_references: bool
) -> None:
    run = tmp_path / name  # a copy: reading a run must not depend on (or write into) the fixture
    shutil.copytree(FIXTURES / name, run)
    got = analyze_json(run)
    check(
        f"h100/{name}",
        json.loads(json.dumps(got).replace(str(run), f"<{name}>")),
        update_references,
    )


def test_every_shared_input_has_a_reference(shared_traces: Path) -> None:
    """A new shared trace gets a reference too: every file under the shared traces is one of the inputs above
    (or inside a folder of ranks that is)."""
    folders = [n for n in SHARED_INPUTS if (shared_traces / n).is_dir()]
    for f in sorted(shared_traces.rglob("*")):
        rel = f.relative_to(shared_traces).as_posix()
        if f.is_dir() or rel == "MANIFEST.md" or rel.startswith("telemetry/") or "/." in f"/{rel}":
            continue
        assert rel in SHARED_INPUTS or any(rel.startswith(d + "/") for d in folders), rel
