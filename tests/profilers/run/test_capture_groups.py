"""The ranks' captures of one rank-watch request are stored as ONE run (both traces under tb/, the named rank
first); a request still waiting for a rank's capture is stored only once that rank's is complete or the run
ended; captures without a job stay one run each."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from profilers.run.captures import capture_groups, capture_records, store_captures
from profilers.store.runs import RunStore

JOB = {"id": "rank_behind-49", "ranks": [0, 1]}
TRIGGER = {
    "kind": "rank_behind",
    "step": 49,
    "reason": "rank 1 behind the others by +30% for 10 steps",
    "numbers": {"rank": 1.0},
}


def _capture(
    run_dir: Path, rank: int, n: int, first: int, job: dict | None, started: float
) -> None:
    folder = run_dir / "captures" / f"r{rank}c{n:03d}"
    folder.mkdir(parents=True)
    with gzip.open(folder / f"rank{rank}.{n}.pt.trace.json.gz", "wt") as fh:
        fh.write(json.dumps({"traceEvents": []}))
    capture = {
        "n": n,
        "rank": rank,
        "trigger": TRIGGER if job else {"kind": "step_time", "step": 1, "reason": "r"},
        "steps": [first, first + 7],
        "status": "done",
        "started_unix": started,
        "finished_unix": started + 1,
        **({"job": job} if job else {}),
    }
    (folder / "capture.json").write_text(json.dumps(capture))


def test_the_ranks_captures_of_one_request_become_one_run(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    parent = store.create("launch", "train.py", files={"boot.json": {"watch": {}}})
    run_dir = Path(parent.run_dir)
    (run_dir / "steps.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "rank": r,
                    "step": s,
                    "wall_ms": 30.0,
                    "backward_ms": 10.0 if r else 25.0,
                    "profiled": s >= 60,
                }
            )
            + "\n"
            for s in range(70)
            for r in (0, 1)
        )
    )
    _capture(run_dir, 0, 1, 10, None, 1.0)  # an earlier capture of rank 0 alone
    _capture(run_dir, 1, 1, 60, JOB, 2.0)
    assert [len(g) for g in capture_groups(run_dir, final=False)] == [
        1
    ]  # rank 0's part not written yet
    assert len(store_captures(store, parent.run_id)) == 1
    _capture(run_dir, 0, 2, 60, JOB, 2.1)
    assert [[p.name for p in g] for g in capture_groups(run_dir, final=False)] == [
        ["r0c001"],
        ["r1c001", "r0c002"],
    ]
    children = store_captures(store, parent.run_id)
    assert len(children) == 2 and store_captures(store, parent.run_id) == children  # stored once
    joint = store.path(children[1])
    assert sorted(p.name.split(".")[0] for p in (joint / "tb").iterdir()) == ["rank0", "rank1"]
    rows = [json.loads(line) for line in (joint / "steps.jsonl").read_text().splitlines()]
    # the steps its trigger judged (from step 49 − 7), unprofiled, then the profiled window, of both ranks
    assert sorted({(r["rank"], r["step"]) for r in rows}) == [
        (r, s) for r in (0, 1) for s in range(42, 68)
    ]
    assert json.loads((joint / "capture.json").read_text())["ranks"] == [1, 0]
    records = capture_records(run_dir)
    assert [(c["rank"], c["ranks"], c["run_id"]) for c in records] == [
        (0, [0], children[0]),
        (1, [1, 0], children[1]),
    ]


def test_a_request_a_rank_never_answered_is_stored_when_the_run_ends(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    parent = store.create("launch", "train.py", files={"boot.json": {"watch": {}}})
    _capture(Path(parent.run_dir), 1, 1, 60, JOB, 2.0)
    assert store_captures(store, parent.run_id) == []
    [child] = store_captures(store, parent.run_id, final=True)
    assert capture_records(Path(parent.run_dir))[0]["run_id"] == child
