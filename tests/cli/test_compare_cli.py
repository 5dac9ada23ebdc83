"""``python -m advisors compare``: exit codes 0/1/2, the JSON fields, pinned baselines, the exported comparison."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli.advisors import main
from profilers.store import baselines
from profilers.run.records import RunStatus
from profilers.store.runs import RunStore
from tests.app.fake_runs import fake_run

REPO = Path(__file__).resolve().parents[2]
FAST = "compute/kineto_resnet50_num_workers_4.pt.trace.json.gz"
SLOW = "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"
FIELDS = (
    "verdict",
    "ratio",
    "interval",
    "max_slowdown",
    "reason",
    "base",
    "new",
    "movers",
    "bottleneck",
    "contention",
)


def _run(capsys, *args: str) -> tuple[int, dict | str, str]:
    code = main(["compare", *args])
    out = capsys.readouterr()
    try:
        return code, json.loads(out.out), out.err
    except json.JSONDecodeError:
        return code, out.out, out.err


@pytest.mark.slow
def test_the_pair_as_a_user_runs_it(shared_traces: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "advisors",
            "compare",
            str(shared_traces / FAST),
            str(shared_traces / SLOW),
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert all(k in doc for k in FIELDS)
    assert (
        doc["verdict"] == "regression" and doc["base"]["step_time_ms"] < doc["new"]["step_time_ms"]
    )
    assert doc["movers"]["categories"][0]["name"] == "dataloader"
    assert set(doc["movers"]) == {"categories", "kernels", "operators"}
    assert doc["bottleneck"]["base"] == "compute" and doc["bottleneck"]["new"] == "data"


def test_exit_codes_and_text(shared_traces: Path, capsys) -> None:
    fast, slow = str(shared_traces / FAST), str(shared_traces / SLOW)
    code, doc, _ = _run(capsys, slow, fast, "--json")
    assert code == 0 and doc["verdict"] == "improvement"
    code, doc, _ = _run(capsys, fast, fast, "--json")
    assert code == 0 and doc["verdict"] == "same" and doc["ratio"] == 1.0
    code, doc, _ = _run(capsys, fast, slow, "--json", "--max-slowdown", "50%")
    assert code == 0 and doc["verdict"] == "same" and doc["max_slowdown"] == 0.5
    code, text, _ = _run(capsys, fast, slow)
    assert (
        code == 1
        and text.startswith("regression: ")
        and "moved: category" in text
        and "dataloader" in text
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["missing.json", "missing2.json"], "no such file or folder"),
        (["{fast}"], "takes two inputs"),
        (["{fast}", "{fast}", "{fast}"], "takes two inputs"),
        (["{fast}", "{fast}", "--max-slowdown", "-3"], "percentage"),
        (["{fast}", "{fast}", "--max-slowdown", "lots"], "not a percentage"),
        (["{snapshot}", "{fast}"], "memory snapshot"),
        (["{bad}", "{fast}"], "'traceEvents' is a str"),
        (["baseline:nope", "{fast}"], "no baseline 'nope'"),
        (["baseline:../x", "{fast}"], "not a baseline name"),
        (["{fast}", "{fast}", "--report", "{tmp}/out.pdf"], "unknown report format"),
        (["--save-baseline", "main", "{fast}", "{fast}"], "takes one RUN"),
        (["--save-baseline", "bad name", "{fast}"], "not a baseline name"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(
    shared_traces: Path, tmp_path: Path, capsys, args, message
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": "no"}')
    values = {
        "fast": shared_traces / FAST,
        "snapshot": shared_traces / "memory/cs336_memory_snapshot.pickle",
        "bad": bad,
        "tmp": tmp_path,
    }
    code, out, err = _run(
        capsys, *[a.format(**values) for a in args], "--store", str(tmp_path / "runs")
    )
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], err


def test_an_unforeseen_exception_is_one_error_line(
    shared_traces: Path, monkeypatch, capsys
) -> None:
    import cli.compare as cli_compare

    def boom(*_args, **_kwargs):
        raise OverflowError("Python int\ntoo large")

    monkeypatch.setattr(cli_compare, "side_of", boom)
    code, _, err = _run(capsys, str(shared_traces / FAST), str(shared_traces / FAST))
    assert (
        code == 2
        and err.startswith("error: could not compare ")
        and err.endswith("OverflowError: Python int too large\n")
    )


def test_a_failed_run_is_bad_input(tmp_path: Path, capsys) -> None:
    store = RunStore(tmp_path / "runs")
    ok, failed = fake_run(store), fake_run(store, status=RunStatus.FAILED)
    code, _, err = _run(capsys, ok.run_dir, failed.run_dir)
    assert code == 2 and "the run ended failed" in err


def test_pinned_baseline(tmp_path: Path, shared_traces: Path, capsys) -> None:
    store = RunStore(tmp_path / "runs")
    first, second = fake_run(store, "first"), fake_run(store, "second", step_ms=80.0)
    s = ["--store", str(store.root)]
    code, doc, _ = _run(capsys, "--save-baseline", "main", first.run_dir, "--json", *s)
    assert (
        code == 0
        and doc["run_id"] == first.run_id
        and doc["previous"] is None
        and doc["step_time_ms"] == 51.0
    )
    code, doc, _ = _run(capsys, "baseline:main", second.run_dir, "--json", *s)
    assert code == 1 and doc["verdict"] == "regression" and doc["base"]["label"] == "baseline:main"
    code, doc, _ = _run(
        capsys, "--save-baseline", "main", second.run_id, "--json", *s
    )  # a run id works too
    assert code == 0 and doc["previous"] == first.run_id
    code, doc, _ = _run(capsys, "baseline:main", second.run_dir, "--json", *s)
    assert code == 0 and doc["verdict"] == "same"
    code, text, _ = _run(
        capsys, "--save-baseline", "trace", str(shared_traces / FAST), *s
    )  # a trace: imported
    assert code == 0 and text.startswith("pinned baseline trace = run ")
    assert store.get(baselines.get(store, "trace").run_id).kind == "upload"
    store.delete(second.run_id)
    code, _, err = _run(capsys, "baseline:main", first.run_dir, *s)
    assert code == 2 and "no longer in" in err


def test_a_run_folder_of_another_store_is_refused(tmp_path: Path, capsys) -> None:
    elsewhere = fake_run(RunStore(tmp_path / "other"))
    code, _, err = _run(
        capsys, "--save-baseline", "main", elsewhere.run_dir, "--store", str(tmp_path / "runs")
    )
    assert code == 2 and "another store" in err and str(tmp_path / "other") in err


@pytest.mark.parametrize("suffix", ["html", "json", "md"])
def test_report_keeps_the_exit_code(
    shared_traces: Path, tmp_path: Path, capsys, suffix: str
) -> None:
    out = tmp_path / f"cmp.{suffix}"
    code, doc, _ = _run(
        capsys, str(shared_traces / FAST), str(shared_traces / SLOW), "--json", "--report", str(out)
    )
    assert code == 1 and doc["verdict"] == "regression"
    text = out.read_text()
    if suffix == "json":
        saved = json.loads(text)
        assert saved["stepwise_comparison"] == 1 and saved["verdict"] == "regression"
        assert len(saved["step_ms"]["base"]) == 6 and saved["tables"]["categories"]
    elif suffix == "md":
        assert text.startswith("# Stepwise comparison") and "**Verdict: regression**" in text
    else:
        assert (
            "Verdict: regression" in text
            and 'id="fig-cmp_steps"' in text
            and "Content-Security-Policy" in text
        )


@pytest.mark.slow
def test_a_job_folder_is_compared_from_its_ranks_summaries(
    shared_traces: Path, tmp_path: Path, monkeypatch
) -> None:
    """Issue 32: compare reads a folder of ranks as their summaries (cached), never every rank's events at once,
    and judges the same sides as a whole load of the folder."""
    import shutil

    from advisors.compare.sides import observe_side, side_from_parts
    from advisors.diagnosis import diagnose
    from advisors.observation import observe
    from profilers.store.files import steps_frame

    job = tmp_path / "dlrm"
    shutil.copytree(shared_traces / "communication" / "param_dlrm_8_ranks", job)
    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", str(tmp_path / "cache"))
    got = observe_side(job, "A")
    assert (
        len(list((tmp_path / "cache").iterdir())) == 8
    )  # one summary per rank, in Stepwise's own cache
    whole = observe(job)
    want = side_from_parts("A", None, steps_frame([]), whole.breakdown, diagnose(whole))
    assert got.samples == want.samples and got.device == want.device
    assert (got.bottleneck, got.headline) == (want.bottleneck, want.headline)


def test_two_jobs_compare_their_ranks_straggler_and_critical_path(
    shared_traces: Path, capsys, tmp_path: Path
) -> None:
    """A folder of ranks on each side: ``ranks`` says how many, the straggler and its critical path by kind,
    the same numbers ``analyze`` gives for that folder; one trace of one rank has none."""
    from cli.advisors import analyze

    job = str(shared_traces / "communication/param_dlrm_8_ranks")
    code, doc, _ = _run(capsys, job, job, "--json")
    assert code == 0 and doc["verdict"] == "same"
    mine = analyze(job)["job"]
    r = doc["ranks"]["base"]
    assert r == doc["ranks"]["new"] and r["ranks"] == 8 and r["traced_ranks"] is None
    assert (
        r["straggler"] is None is mine["straggler"]
        and r["straggler_reason"] == mine["straggler_reason"]
    )
    cp = mine["critical_path"]
    assert r["critical_path"] == {
        "rank": cp["rank"],
        "step": cp["step"],
        "total_ms": cp["total_ms"],
        "by_kind": {k["kind"]: k["ms"] for k in cp["by_kind"]},
    }
    code, doc, _ = _run(capsys, str(shared_traces / FAST), job, "--json")
    assert doc["ranks"]["base"] is None and doc["ranks"]["new"]["ranks"] == 8
    code, text, _ = _run(capsys, job, job)
    assert "base ranks: 8 · no straggler beyond the noise" in text
    assert f"rank {cp['rank']}'s critical path {cp['total_ms']:.4g} ms" in text
    code, with_report, _ = _run(capsys, job, job, "--json", "--report", str(tmp_path / "c.md"))
    assert (
        with_report["ranks"]["base"] == with_report["ranks"]["new"] == r
    )  # the JSON without --report: one number
    md = (tmp_path / "c.md").read_text(encoding="utf-8")
    assert "## Ranks" in md and "- BASE: 8 · no straggler beyond the noise" in md
