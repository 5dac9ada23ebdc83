"""Claims on a shared file's pieces: each piece is taken once, by whoever reaches it first, across processes."""

from __future__ import annotations

from multiprocessing import get_context
from pathlib import Path

import pytest

import profilers.trace.json_events as trace_json
from profilers.trace import pieces as claims_mod
from profilers.trace import parse_worker
from profilers.trace.pieces import PARENT, WORKER, Claims
from profilers.trace.parallel import _assemble, read_sequential
from profilers.trace.raw_columns import merge
from profilers.trace.sources import plain_file

TRACE = "compute/kineto_resnet50_num_workers_4.pt.trace.json.gz"


def test_a_piece_is_taken_once_and_the_table_says_by_whom() -> None:
    c = Claims()
    assert c.take(0, WORKER) and not c.take(0, PARENT) and not c.take(0, WORKER)
    assert c.take(1, PARENT) and not c.take(1, WORKER)
    assert (
        c.take(2, 1) and c.taken_by(WORKER) == 1 and c.taken_by(PARENT) == 1 and c.taken_by(1) == 1
    )
    beyond = claims_mod.SIZE + 3  # past the table: the first worker's, every time
    assert c.take(beyond, WORKER) and c.take(beyond, WORKER) and not c.take(beyond, PARENT)
    assert not c.finished()
    c.finish()
    assert c.finished()


def _take_all(c: Claims, who: int, n: int, conn: object) -> None:
    conn.send([i for i in range(n) if c.take(i, who)])  # type: ignore[attr-defined]


def test_two_processes_racing_for_the_same_pieces_split_them_exactly() -> None:
    c = Claims()
    ctx = get_context("fork")
    pipes = [ctx.Pipe() for _ in range(2)]
    procs = [
        ctx.Process(target=_take_all, args=(c, who, 5000, pipes[k][1]))
        for k, who in enumerate((WORKER, PARENT))
    ]
    for p in procs:
        p.start()
    got = [pipes[k][0].recv() for k in range(2)]
    for p in procs:
        p.join()
    assert sorted(got[0] + got[1]) == list(range(5000))  # none twice, none lost
    assert c.taken_by(WORKER) == len(got[0]) and c.taken_by(PARENT) == len(got[1])


def test_a_worker_and_the_parent_reading_by_claims_make_the_sequential_document(
    shared_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker takes the even pieces it reaches; the parent, reading after it, takes every other one and the
    last: put together in share order, the document is the sequential reader's, piece for piece."""
    monkeypatch.setattr(trace_json, "WHOLE_LIMIT", 256 * 1024)
    monkeypatch.setattr(trace_json, "CHUNK_BYTES", 256 * 1024)
    path = shared_traces / TRACE
    c = Claims()
    worker = parse_worker.read_share(
        str(path), "t", WORKER, lambda n: n % 2 == 0 and c.take(n, WORKER)
    )
    assert not c.finished()  # the worker's own read never said it reached the end (no at_end here)
    parent = parse_worker.claimed_share(str(path), "t", PARENT, c)
    assert worker[0] == parent[0] == "parts" and worker[2] and parent[2]
    assert {n for n, _ in worker[2]}.isdisjoint({n for n, _ in parent[2]})
    doc = _assemble([worker, parent])
    reference = read_sequential(plain_file(path))
    assert doc.top == reference.top and doc.notes == reference.notes
    got, want = merge(doc.parts), merge(reference.parts)
    for col in ("kind", "start_ns", "dur_ns", "pid", "device", "stream", "correlation"):
        assert (getattr(got, col) == getattr(want, col)).all(), col
    assert got.name.uniques == want.name.uniques and (got.name.codes == want.name.codes).all()


def test_the_parent_stops_as_soon_as_a_worker_has_passed_the_end(
    shared_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace_json, "CHUNK_BYTES", 256 * 1024)
    path = str(shared_traces / TRACE)
    c = Claims()
    worker = parse_worker.claimed_share(
        path, "t", WORKER, c
    )  # alone: it takes every piece, then says so
    assert c.finished() and worker[2]
    assert parse_worker.claimed_share(path, "t", PARENT, c)[2] == []


def test_a_share_shipped_through_a_memory_file_comes_back_the_same(
    shared_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's columns go back through a memory file (out-of-band pickle buffers), not the pool's pipe: what
    the parent maps is what the worker had, arrays and all; a file it cannot write to sends the result itself."""
    import os

    import numpy as np

    from profilers.trace.parallel import _memory_files

    monkeypatch.setattr(trace_json, "CHUNK_BYTES", 256 * 1024)
    result = parse_worker.share(str(shared_traces / TRACE), "t", 0, 1)
    fds = _memory_files(2)
    if not fds:
        pytest.skip("no memfd_create here: results go through the pipe")
    try:
        shipped = parse_worker.ship(result, fds, 1)
        assert (
            shipped[:2] == ("shipped", 1)
            and sum(shipped[3]) > 100_000
            and len(shipped[2]) < 100_000
        )
        back = parse_worker.unship(shipped, fds)
        assert back[0] == "parts" and back[1] == result[1] and back[3:] == result[3:]
        for (n, got), (m, want) in zip(back[2], result[2]):
            assert n == m and got.name.uniques == want.name.uniques
            for col in ("kind", "start_ns", "dur_ns", "pid", "device", "stream", "correlation"):
                assert np.array_equal(getattr(got, col), getattr(want, col)), col
        back[2][0][1].start_ns[0] += 1  # the mapped arrays are ordinary writable arrays
        bad = os.open(os.devnull, os.O_RDONLY)
        try:
            assert (
                parse_worker.ship(result, [bad], 0) is result
            )  # cannot write there: the result itself
            with pytest.raises(parse_worker.Unreadable):
                parse_worker.unship(("shipped", 0, b"", [10]), [bad])
        finally:
            os.close(bad)
    finally:
        for fd in fds:
            os.close(fd)
