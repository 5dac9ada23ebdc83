"""Pinned baselines: one file per name beside the runs, moved by pinning again, never pointing at a ghost."""

from __future__ import annotations

from pathlib import Path

import pytest

from profilers.store import baselines
from profilers.errors import RunError
from profilers.store.runs import RunStore


def test_pin_get_list_and_move(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    a, b = store.create("run", "a"), store.create("run", "b")
    assert baselines.list_baselines(store) == []
    first = baselines.pin(store, "main", a.run_id)
    assert first.previous is None and baselines.get(store, "main").run_id == a.run_id
    moved = baselines.pin(store, "main", b.run_id)
    assert moved.previous == a.run_id and baselines.run_dir(store, "main") == store.path(b.run_id)
    baselines.pin(store, "release-1.2", a.run_id)
    assert [x.name for x in baselines.list_baselines(store)] == ["main", "release-1.2"]
    assert (
        RunStore(store.root).list(limit=None) and store.reindex() == 2
    )  # the folder is not taken for a run


def test_refusals(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    run = store.create("run", "a")
    for bad in ("", "../up", "a b", "-x", "x" * 65):
        with pytest.raises(RunError, match="not a baseline name"):
            baselines.pin(store, bad, run.run_id)
    with pytest.raises(RunError):
        baselines.pin(store, "main", "20990101-000000-none-0000")  # no such run
    with pytest.raises(RunError, match="no baseline 'main'"):
        baselines.get(store, "main")
    (store.root / baselines.FOLDER).mkdir(exist_ok=True)
    (store.root / baselines.FOLDER / "torn.json").write_text('{"run_id": ')
    assert baselines.list_baselines(store) == []  # a torn file is no baseline
