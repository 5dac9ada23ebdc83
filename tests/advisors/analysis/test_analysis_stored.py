"""One analysis, computed once (issue 41 item 2): ``advisors.analysis.analyse`` stores a finished run's analysis in
its folder, every later reader gets that very value back, and a changed input, other code or another layout
computes it again. The stored form reads back to the same analysis, frames and types included, for every shared
trace and H100 run folder."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

from advisors.analysis import Analysis, analyse, build
from advisors.analysis import stored
from advisors.analysis.codec import decode, encode
from advisors.compare.sides import observe_side
from cli.advisors import analyze
from profilers.run.records import RunStatus
from profilers.store.runs import RunStore
from tests.app.fake_runs import fake_run
from tests.references.test_analyze_references import FIXTURES, RUN_FOLDERS, SHARED_INPUTS


def same(x: Any, y: Any, where: str = "analysis") -> None:
    """``x`` and ``y`` hold the same values of the same types, frames compared column by column."""
    if isinstance(x, pd.DataFrame):
        pd.testing.assert_frame_equal(x, y, obj=where)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        assert type(x) is type(y), where
        for f in dataclasses.fields(x):
            same(getattr(x, f.name), getattr(y, f.name), f"{where}.{f.name}")
    elif isinstance(x, dict):
        assert list(x) == list(y), where
        for k in x:
            same(x[k], y[k], f"{where}[{k!r}]")
    elif isinstance(x, (list, tuple)):
        # plain JSON (``job``, evidence) holds lists where the value had tuples; typed fields keep their tuples
        assert type(x) is type(y) or ".job" in where, where
        assert len(x) == len(y), where
        for i, (u, v) in enumerate(zip(x, y)):
            same(u, v, f"{where}[{i}]")
    elif isinstance(x, float) and x != x:
        assert y != y, where
    else:
        assert x == y and type(x) is type(y), (where, x, y)


def _round_trip(a: Analysis) -> Analysis:
    return decode(orjson.loads(orjson.dumps(encode(a, Analysis))), Analysis)


@pytest.mark.parametrize("name", SHARED_INPUTS)
def test_the_stored_form_reads_back_to_the_very_analysis(name: str, shared_traces: Path) -> None:
    a = analyse(shared_traces / name)
    back = _round_trip(a)
    same(a, back)
    assert orjson.dumps(back.to_json()) == orjson.dumps(a.to_json())


@pytest.mark.parametrize("name", RUN_FOLDERS)
def test_a_run_folder_reads_back_to_the_very_analysis(name: str, tmp_path: Path) -> None:
    a = analyse(shutil.copytree(FIXTURES / name, tmp_path / name))
    assert a.run is not None
    same(a, _round_trip(a))


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every run the analysis computes (rather than reads), in order."""
    calls: list[Path] = []
    real = build.analyse_run

    def counted(run_dir: Path, *args: Any, **kwargs: Any) -> Analysis:
        calls.append(run_dir)
        return real(run_dir, *args, **kwargs)

    monkeypatch.setattr(build, "analyse_run", counted)
    return calls


def test_a_finished_run_is_analysed_once_and_read_back_by_every_door(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RunStore(tmp_path / "runs")
    run_dir = Path(fake_run(store, label="once").run_dir)
    calls = _counting(monkeypatch)
    first = analyse(run_dir)
    doc = json.loads((run_dir / stored.ANALYSIS_FILE).read_text())
    assert (doc["schema"], doc["code"]) == (stored.SCHEMA, stored.code_digest())
    assert doc["headline"] == {
        "step_time_ms": 51.0,
        "samples_per_s": first.samples_per_s,
        "bottleneck": first.diagnosis.bottleneck.value,
        "confidence": first.diagnosis.confidence,
    }
    names = {r for r, *_ in doc["inputs"]}
    assert {
        "manifest.json",
        "steps.jsonl",
        "tb/rank0.1.pt.trace.json",
    } <= names and stored.ANALYSIS_FILE not in names
    # analyze --json, a report, compare: each reads the stored value, none computes it again
    assert analyze(str(run_dir)) == first.to_json()
    assert observe_side(run_dir).step_time_ms == pytest.approx(first.step_time_ms, rel=0.05)
    same(analyse(run_dir), first)
    assert calls == [run_dir]


def test_a_changed_input_other_code_or_another_layout_is_computed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RunStore(tmp_path / "runs")
    run_dir = Path(fake_run(store, label="again").run_dir)
    calls = _counting(monkeypatch)
    analyse(run_dir)
    with open(run_dir / "steps.jsonl", "a") as fh:  # the run's steps changed since
        fh.write(
            json.dumps(
                {
                    "rank": 0,
                    "step": 8,
                    "wall_ms": 500.0,
                    "loss": 0.1,
                    "samples": 16,
                    "profiled": False,
                    "t_unix_ns": 1,
                }
            )
            + "\n"
        )
    analyse(run_dir)
    monkeypatch.setattr(stored, "code_digest", lambda: "another Stepwise")
    analyse(run_dir)
    monkeypatch.setattr(stored, "SCHEMA", stored.SCHEMA + 1)
    analyse(run_dir)
    analyse(run_dir)  # stored by the last one: read
    assert len(calls) == 4


def test_a_damaged_stored_file_is_computed_again_never_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RunStore(tmp_path / "runs")
    run_dir = Path(fake_run(store, label="damaged").run_dir)
    want = analyse(run_dir).to_json()
    doc = json.loads((run_dir / stored.ANALYSIS_FILE).read_text())
    doc["analysis"]["diagnosis"] = {"bottleneck": "nonsense"}
    (run_dir / stored.ANALYSIS_FILE).write_text(json.dumps(doc))
    assert analyse(run_dir).to_json() == want
    (run_dir / stored.ANALYSIS_FILE).write_text("{not json")
    assert analyse(run_dir).to_json() == want


def test_a_run_still_training_is_not_stored(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    record = fake_run(store, label="training")
    store.update(record.run_id, status=RunStatus.RUNNING)
    analyse(Path(record.run_dir))
    assert not (Path(record.run_dir) / stored.ANALYSIS_FILE).exists()


def test_a_run_folder_outside_a_run_store_is_left_as_it_is(tmp_path: Path) -> None:
    """A run folder copied anywhere else (a colleague's, a fixture, read-only storage) is read, never written."""
    store = RunStore(tmp_path / "runs")
    copy = shutil.copytree(fake_run(store, label="elsewhere").run_dir, tmp_path / "elsewhere")
    before = sorted(p.relative_to(copy) for p in copy.rglob("*"))
    assert analyse(copy).step_time_ms == 51.0
    assert sorted(p.relative_to(copy) for p in copy.rglob("*")) == before
