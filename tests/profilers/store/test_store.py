"""The run store: atomic folders, a WAL index shared by threads and processes, recovery, safe uploads."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from profilers.store import files as store_io
from profilers.errors import RunError
from profilers.run.records import RunResult, RunStatus
from profilers.store.runs import RunStore

TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces"


def _write_steps(run_dir: Path, n: int, ranks: int = 1, torn_tail: bool = True) -> None:
    with open(run_dir / "steps.jsonl", "w") as fh:
        for step in range(n):
            for rank in range(ranks):
                fh.write(
                    json.dumps(
                        {
                            "rank": rank,
                            "step": step,
                            "wall_ms": 10.0 + step,
                            "loss": 1.0 / (step + 1),
                            "samples": 4,
                            "profiled": False,
                            "t_unix_ns": 1_700_000_000_000_000_001 + step,
                        }
                    )
                    + "\n"
                )
        if torn_tail:
            fh.write('{"rank": 0, "step": 99, "wal')  # a process killed mid-line


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_create_finish_list_roundtrip(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    a = store.create("run", "first", spec={"workload": "data_bound", "world_size": 2})
    b = store.create("launch", "second")
    assert a.status is RunStatus.RUNNING and a.workload == "data_bound" and a.world_size == 2
    assert json.loads((Path(a.run_dir) / "spec.json").read_text())["workload"] == "data_bound"
    assert [r.run_id for r in store.list()] == [b.run_id, a.run_id]
    assert [r.run_id for r in store.list(kind="run")] == [a.run_id]
    done = store.finish(
        a.run_id, RunResult(RunStatus.OK, steps_done=5, step_time_ms=12.5, samples_per_s=320.0)
    )
    assert done.status is RunStatus.OK and done.step_time_ms == 12.5
    assert store.get(a.run_id) == done
    assert store.read_result(a.run_id).steps_done == 5  # type: ignore[union-attr]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_spec_is_stored_as_its_json_and_indexed(tmp_path: Path) -> None:
    spec = {
        "workload": "communication_bound",
        "world_size": 2,
        "params": {"size": "tiny"},
        "lr": 1e-3,
    }
    record = RunStore(tmp_path).create("run", "typed", spec)
    assert record.workload == "communication_bound" and record.world_size == 2
    assert json.loads((Path(record.run_dir) / "spec.json").read_text()) == spec


def test_index_is_rebuilt_from_folders(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    run = store.create("run", "x", spec={"workload": "w"})
    store.finish(run.run_id, RunResult(RunStatus.FAILED, error="boom"))
    (tmp_path / "index.sqlite").write_bytes(b"not a database at all" * 100)
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"index.sqlite{suffix}").unlink(missing_ok=True)
    again = RunStore(tmp_path).get(run.run_id)
    assert again.status is RunStatus.FAILED and again.error == "boom"


def test_index_location_is_configurable_and_rebuilt_where_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, local = tmp_path / "shared-runs", tmp_path / "local" / "stepwise-index.sqlite"
    store = RunStore(runs, index=local)
    run = store.create("run", "x", spec={"workload": "w"})
    store.finish(run.run_id, RunResult(RunStatus.OK, steps_done=3))
    assert local.is_file() and not (runs / "index.sqlite").exists()
    monkeypatch.setenv(
        "STEPWISE_INDEX", str(tmp_path / "other" / "index.sqlite")
    )  # a new, empty location
    again = RunStore(runs)
    assert (tmp_path / "other" / "index.sqlite").is_file() and not (runs / "index.sqlite").exists()
    assert [r.run_id for r in again.list()] == [run.run_id] and again.get(
        run.run_id
    ).status is RunStatus.OK


def _create_many(root: str, n: int) -> list[str]:
    store = RunStore(Path(root))
    return [
        store.create("run", f"p{os.getpid()}-{i}", spec={"workload": "w"}).run_id for i in range(n)
    ]


def test_concurrent_creates_from_processes_and_threads(tmp_path: Path) -> None:
    RunStore(tmp_path)
    # fork: the children only need the store (own connections, opened after the fork); spawn re-imported this
    # module, pandas and the store in each child, ~2 s of CPU apiece on 2 cores, for the same test.
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        ids = [i for chunk in pool.starmap(_create_many, [(str(tmp_path), 15)] * 2) for i in chunk]
    threads_ids: list[str] = []
    threads = [
        threading.Thread(target=lambda: threads_ids.extend(_create_many(str(tmp_path), 10)))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids += threads_ids
    assert len(ids) == len(set(ids)) == 60
    store = RunStore(tmp_path)
    assert {r.run_id for r in store.list(limit=None)} == set(ids)
    assert store.reindex() == 60
    with store._index._db() as db:  # the index really is in WAL mode
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_an_id_finished_by_another_writer_after_the_check_is_not_claimed_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race behind the concurrent test, made certain: another writer with the same id renames its folder
    into place just after this one looked (the look says free, the temporary name is free again)."""
    import profilers.store.runs as store_mod

    store = RunStore(tmp_path)
    monkeypatch.setattr(store_mod.time, "strftime", lambda fmt: "20261122-120000")
    tokens, real_token = iter(["abcd", "abcd", "beef"]), store_mod.secrets.token_hex
    monkeypatch.setattr(
        store_mod.secrets, "token_hex", lambda n: next(tokens) if n == 2 else real_token(n)
    )
    first = store.create("run", "w", spec={"workload": "w"})
    assert first.run_id == "20261122-120000-w-abcd"
    real_exists, looked = Path.exists, []

    def stale_first_look(self: Path, *a: object, **k: object) -> bool:
        if self.name == first.run_id and not looked:
            looked.append(self)
            return False  # what the look saw a moment before the other writer's rename
        return real_exists(self, *a, **k)

    monkeypatch.setattr(Path, "exists", stale_first_look)
    second = store.create("run", "w", spec={"workload": "w"})
    assert looked and second.run_id == "20261122-120000-w-beef"
    assert {r.run_id for r in store.list(limit=None)} == {first.run_id, second.run_id}


def test_recover_settles_stale_running_runs(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    stale = store.create("run", "stale", spec={"workload": "w"})
    _write_steps(Path(stale.run_dir), 4)
    store.update(stale.run_id, pid=_dead_pid())
    alive = store.create("run", "alive", spec={"workload": "w"})
    store.update(alive.run_id, pid=os.getpid())
    finished_unwatched = store.create("run", "unwatched", spec={"workload": "w"})
    store.update(finished_unwatched.run_id, pid=_dead_pid())
    (Path(finished_unwatched.run_dir) / "result.json").write_text(
        json.dumps({"status": "ok", "steps_done": 7})
    )

    changed = store.recover()

    assert set(changed) == {stale.run_id, finished_unwatched.run_id}
    killed = store.get(stale.run_id)
    assert killed.status is RunStatus.KILLED and "gone" in (killed.error or "")
    result = store.read_result(stale.run_id)
    assert (
        result is not None and result.steps_done == 4 and result.final_loss == pytest.approx(0.25)
    )
    assert store.get(alive.run_id).status is RunStatus.RUNNING
    assert store.get(finished_unwatched.run_id).status is RunStatus.OK
    assert store.recover() == []  # idempotent


def test_folder_without_index_row_is_indexed_and_junk_is_ignored(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    run = store.create("run", "x")
    with store._index._db() as db:
        db.execute("DELETE FROM runs")
    (tmp_path / "20260101-000000-junk-abcd").mkdir()  # looks like a run, has no manifest
    (tmp_path / "notes.txt").write_text("hello")
    store.recover()
    assert [r.run_id for r in store.list()] == [run.run_id]


def test_read_steps_skips_torn_lines_and_keeps_big_timestamps(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    run = store.create("run", "x")
    _write_steps(Path(run.run_dir), 3, ranks=2)
    steps = store.read_steps(run.run_id)
    assert len(steps) == 6 and list(steps.columns) == list(store_io.STEP_COLUMNS)
    assert int(steps["t_unix_ns"].iloc[0]) == 1_700_000_000_000_000_001
    assert store.read_telemetry(run.run_id).empty and store.read_progress(run.run_id) is None


def test_import_trace_copies_file_and_folder(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    src = TRACES / "edge" / "hta_no_rank_info.json.gz"
    one = store.import_trace(src, "upload")
    copied = Path(one.run_dir) / "trace" / src.name
    assert (
        copied.read_bytes() == src.read_bytes()
        and one.status is RunStatus.OK
        and one.kind == "upload"
    )
    folder = store.import_trace(TRACES / "edge", None)
    assert len(list((Path(folder.run_dir) / "trace").rglob("*.json*"))) == len(
        list((TRACES / "edge").glob("*"))
    )


@pytest.mark.parametrize("case", ["symlink", "symlink_inside", "fifo", "too_big", "missing"])
def test_import_trace_refuses_unsafe_input_and_leaves_nothing(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RunStore(tmp_path / "store")
    src = tmp_path / "upload"
    if case == "symlink":
        os.symlink("/etc/passwd", src)
    elif case == "symlink_inside":
        src.mkdir()
        (src / "rank0.json").write_text("{}")
        os.symlink("/etc/passwd", src / "rank1.json")
    elif case == "fifo":
        os.mkfifo(src)
    elif case == "too_big":
        monkeypatch.setattr(store_io, "MAX_IMPORT_BYTES", 1000)
        src.write_bytes(b"x" * 5000)
    with pytest.raises(RunError):
        store.import_trace(src, "bad")
    assert store.list() == []
    assert [
        p.name for p in store.root.iterdir() if p.name != "index.sqlite" and "sqlite" not in p.name
    ] == []


def test_delete_and_bad_ids(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    run = store.create("run", "x")
    store.update(run.run_id, pid=os.getpid())
    with pytest.raises(RunError):
        store.delete(run.run_id)  # still running
    store.finish(run.run_id, RunResult(RunStatus.KILLED))
    store.delete(run.run_id)
    assert store.list() == [] and not Path(run.run_dir).exists()
    for bad in ("../etc", "", "x/../../y"):
        with pytest.raises(RunError):
            store.path(bad)
