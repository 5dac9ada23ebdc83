"""The parallel reader builds the very trace the sequential one does, falls back where it must, and says so.

Pieces are made small here (``CHUNK_BYTES`` of 256 KiB) so that every shared trace is cut into many pieces and
really goes through the worker processes. Each test forks workers from this (large) test process: the fast lane
keeps one trace's equality, a fallback and the head start; the rest run with the slow tests (the full suite)."""

from __future__ import annotations

import gzip
import os
import threading
from pathlib import Path

import orjson
import pandas as pd
import pytest

import profilers.trace.json_events as trace_json
import profilers.trace.parallel as parallel
import profilers.trace.pieces as pieces
from cli.head_start import analyze_path
from profilers.errors import TraceError
from profilers.trace.events import Trace
from profilers.trace.load import load_trace
from tests.trace_factory import kernel, step, x

pytestmark = pytest.mark.real_parse  # every load parses (the session's shared-trace memo stays out)

SMALL = 256 * 1024
BIG = [
    "communication/hta_v100_2rank_216k_events.json.gz",
    "data/tracelens_h100_owlv2.json.gz",
]  # ~2 s each
TRACES = [
    "compute/kineto_resnet50_num_workers_4.pt.trace.json.gz",
    "communication/param_dlrm_8_ranks",
    "memory/tracelens_h100_qwen1.5-0.5b.json.gz",
    "host/tracelens_h100_bert-small.json.gz",
]


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_json, "WHOLE_LIMIT", SMALL)
    monkeypatch.setattr(trace_json, "CHUNK_BYTES", SMALL)


@pytest.fixture
def readers(monkeypatch: pytest.MonkeyPatch) -> list[parallel.ParallelReader]:
    """Every parallel reader the loads below make, to look at what it did."""
    made: list[parallel.ParallelReader] = []

    class Recorded(parallel.ParallelReader):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(parallel, "ParallelReader", Recorded)
    return made


def load_with(path: Path, workers: int, monkeypatch: pytest.MonkeyPatch) -> Trace:
    monkeypatch.setenv(parallel.WORKERS_ENV, str(workers))
    return load_trace(path)


def assert_same_trace(a: Trace, b: Trace) -> None:
    pd.testing.assert_frame_equal(a.events, b.events)
    for col in (
        "name",
        "tid",
        "dtype",
        "kind",
    ):  # unordered categoricals compare equal in any order: check it
        assert list(a.events[col].cat.categories) == list(b.events[col].cat.categories), col
    pd.testing.assert_frame_equal(a.steps, b.steps)
    pd.testing.assert_frame_equal(a.memory, b.memory)
    assert (a.warnings, a.ranks, a.world_size, a.backend, a.steps_inferred, a.devices) == (
        b.warnings,
        b.ranks,
        b.world_size,
        b.backend,
        b.steps_inferred,
        b.devices,
    )


@pytest.mark.parametrize(
    "name", TRACES[:1] + [pytest.param(n, marks=pytest.mark.slow) for n in TRACES[1:] + BIG]
)
@pytest.mark.slow
def test_every_shared_trace_reads_the_same_on_workers(
    name: str,
    shared_traces: Path,
    small_pieces: None,
    readers: list,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = shared_traces / name
    sequential = load_with(path, 0, monkeypatch)
    assert not readers
    on_workers = load_with(path, 2, monkeypatch)
    assert_same_trace(sequential, on_workers)
    assert readers[-1].sent > 0 and readers[-1].sequential == []
    assert readers[-1].shared == (
        [path.name]
        if name.endswith(".gz") and path.stat().st_size >= parallel.SHARE_MIN_BYTES
        else []
    )


@pytest.mark.slow  # the fast lane keeps the equality on one trace, a fallback, the head start
def test_the_workers_keep_a_bounded_number_of_pieces_in_flight(
    shared_traces: Path, small_pieces: None, readers: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parallel, "IN_FLIGHT_BYTES", 4 * SMALL)
    monkeypatch.setattr(
        parallel, "SHARE_MIN_BYTES", 1 << 40
    )  # the parent inflates and pipes the pieces
    load_with(shared_traces / TRACES[0], 2, monkeypatch)
    (reader,) = readers
    assert reader.sent > 20  # 13 MB in 256 KiB pieces
    assert reader.max_in_flight == 2 * 2 + 1


def _nested_layout(path: Path) -> Path:
    """Events one per line, and one whose args hold a list of objects written at the events' own indent: the
    separator ``},\\n  {`` then also occurs inside an event, where a cut cannot decode."""
    lines = [
        orjson.dumps(e).decode()
        for e in [step(1, 0, 10**6)] + [x(f"op{i}", 10 + i, 5) for i in range(8000)]
    ]
    odd = (
        '{"ph": "X", "name": "nested", "ts": 50, "dur": 5, "pid": 1, "tid": 1, "args": {"list": [{"a": 1},\n  '
        + ",\n  ".join('{"b": %d}' % i for i in range(60000))
        + "]}}"
    )
    lines.insert(4000, odd)
    path.write_text('{"traceEvents": [\n  ' + ",\n  ".join(lines) + "\n]}")
    return path


def test_a_cut_inside_an_event_sends_that_file_to_the_sequential_reader(
    tmp_path: Path, small_pieces: None, readers: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _nested_layout(tmp_path / "nested.json")
    sequential = load_with(path, 0, monkeypatch)
    on_workers = load_with(path, 2, monkeypatch)
    assert_same_trace(sequential, on_workers)
    assert "nested" in set(on_workers.events["name"])
    assert readers[-1].sequential == ["nested.json: a piece did not decode at its cut"]


@pytest.mark.slow  # the fast lane keeps the equality on one trace, a fallback, the head start
def test_one_line_json_is_read_sequentially_and_the_same(
    tmp_path: Path,
    shared_traces: Path,
    small_pieces: None,
    readers: list,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doc = orjson.loads(gzip.decompress((shared_traces / TRACES[0]).read_bytes()))
    path = tmp_path / "one_line.json"
    path.write_bytes(orjson.dumps(doc))
    assert_same_trace(load_with(path, 0, monkeypatch), load_with(path, 2, monkeypatch))
    assert readers[-1].sequential == ["one_line.json: events are not one per line"]


def _die(*args, **kwargs):
    os._exit(3)


@pytest.mark.slow  # the fast lane keeps the equality on one trace, a fallback, the head start
def test_a_worker_that_dies_hands_the_rest_to_the_sequential_reader(
    shared_traces: Path, small_pieces: None, readers: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = shared_traces / TRACES[0]
    sequential = load_with(path, 0, monkeypatch)
    from profilers.trace import parse_worker

    monkeypatch.setattr(
        parse_worker, "piece", _die
    )  # forked workers inherit the patch and exit on their first piece
    assert_same_trace(sequential, load_with(path, 2, monkeypatch))
    assert readers[-1].sequential and all(
        s.endswith("a worker died") for s in readers[-1].sequential
    )


@pytest.mark.slow  # the fast lane keeps the equality on one trace, a fallback, the head start
def test_errors_are_the_sequential_readers_own(
    tmp_path: Path, shared_traces: Path, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = gzip.decompress((shared_traces / TRACES[0]).read_bytes())
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(data[: len(data) // 2])
    folder = tmp_path / "ranks"
    folder.mkdir()
    (folder / "rank0.json").write_bytes(data)
    (folder / "rank1.json").write_bytes(data[: len(data) // 3])
    for path in (truncated, folder):
        messages = []
        for workers in (0, 2):
            with pytest.raises(TraceError) as err:
                load_with(path, workers, monkeypatch)
            messages.append(str(err.value))
        assert messages[0] == messages[1] and (
            "truncated" in messages[0] or "not valid JSON" in messages[0]
        )


@pytest.mark.slow
def test_a_primed_reader_is_the_one_the_load_uses(
    shared_traces: Path, small_pieces: None, readers: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = shared_traces / TRACES[0]  # 1.1 MB on disk: above PRIME_MIN_BYTES
    sequential = load_with(path, 0, monkeypatch)
    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    assert parallel.prime(path)
    assert (
        readers[0]._pool is not None
    )  # the workers are forked before prime returns; a thread sends them pieces
    assert_same_trace(sequential, load_trace(path))
    assert len(readers) == 1 and readers[0].sent > 0 and not parallel._PRIMED


def test_what_is_not_primed(
    tmp_path: Path, shared_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    small = tmp_path / "small.json"
    small.write_bytes(orjson.dumps({"traceEvents": [step(1, 0, 10), kernel("k", 1, 2)]}))
    assert not parallel.prime(small)  # under PRIME_MIN_BYTES: nothing to gain
    assert not parallel.prime(
        shared_traces / TRACES[1]
    )  # a folder: the load reads it on workers anyway
    assert parallel.prime(shared_traces / TRACES[0])
    parallel.take_primed(
        shared_traces / TRACES[0], []
    )  # not the files it started on: closed, not handed out
    assert not parallel.prime(tmp_path / "missing.json")
    monkeypatch.setenv(parallel.WORKERS_ENV, "1")
    assert not parallel.prime(shared_traces / BIG[0])
    assert not parallel._PRIMED


def test_no_workers_in_a_process_with_other_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    assert parallel.worker_count() == 2
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert (
            parallel.worker_count() == 0
        )  # forking a threaded process (the dashboard) can deadlock
    finally:
        stop.set()
        t.join()
    monkeypatch.setenv(parallel.WORKERS_ENV, "many")
    assert parallel.worker_count() == 0


@pytest.mark.parametrize(
    "argv, path",
    [
        (["analyze", "t.json", "--json"], "t.json"),
        (["analyze", "--report", "out.html", "t.json.gz"], "t.json.gz"),
        (["analyze", "--device-memory-gib", "80", "snap.pickle", "--json"], "snap.pickle"),
        (["compare", "a.json", "b.json"], None),
        (["optimize", "--json", "--", "train.py"], None),
        (["analyze"], None),
        ([], None),
    ],
)
def test_the_head_start_finds_analyzes_path(argv: list[str], path: str | None) -> None:
    assert analyze_path(argv) == path


@pytest.mark.slow  # the fast lane keeps the equality on one trace, a fallback, the head start
def test_a_folder_of_whole_documents_is_read_a_file_per_worker(
    shared_traces: Path, readers: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = shared_traces / TRACES[1]  # 8 rank files, each small enough to be read whole
    sequential = load_with(path, 0, monkeypatch)
    monkeypatch.setattr(parallel, "WORKER_DOCUMENT_BYTES", 1)
    assert_same_trace(sequential, load_with(path, 2, monkeypatch))
    assert readers[-1].sent == 8 and readers[-1].sequential == []


def test_an_event_longer_than_a_piece_is_read_by_both(
    tmp_path: Path, small_pieces: None, readers: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1 MB name (four pieces long) in a 3 MB trace: the in-process reader cuts after it (it used to search the
    first piece for a cut forever), and the parallel one leaves that file to it."""
    events = [step(1, 0, 10**6)] + [x(f"op{i}", 10 + i, 5) for i in range(20000)]
    events.insert(2, x("long" * 250_000, 5, 1))
    path = tmp_path / "long.json"
    path.write_text(
        '{"traceEvents": [\n  ' + ",\n  ".join(orjson.dumps(e).decode() for e in events) + "\n]}"
    )
    sequential = load_with(path, 0, monkeypatch)
    assert sequential.n_events == len(events)
    assert_same_trace(sequential, load_with(path, 2, monkeypatch))
    assert readers[-1].sequential == [
        "long.json: an event longer than a piece, or a change of layout"
    ]


def _plain(shared_traces: Path, tmp_path: Path, name: str | None) -> Path:
    """An uncompressed trace: a shared one decompressed, or (``None``) ~2.5 MB of made-up events."""
    if name is not None:
        path = tmp_path / Path(name).name.removesuffix(".gz")
        path.write_bytes(gzip.decompress((shared_traces / name).read_bytes()))
        return path
    events = (
        [step(1, 0, 10**6)]
        + [x(f"op{i % 300}", 10 + i, 5) for i in range(30000)]
        + [kernel("k", 20, 9)]
    )
    path = tmp_path / "made_up.json"
    path.write_text(
        '{"traceEvents": [\n  '
        + ",\n  ".join(orjson.dumps(e).decode() for e in events)
        + '\n], "traceName": "made up"}'
    )
    return path


@pytest.mark.parametrize("name", [None, pytest.param(TRACES[0], marks=pytest.mark.slow)])
def test_an_uncompressed_file_is_read_by_ranges_on_the_workers_and_the_same(
    name: str | None,
    tmp_path: Path,
    shared_traces: Path,
    small_pieces: None,
    readers: list,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The workers read an uncompressed file's byte ranges themselves (no piece goes through a pipe); the cuts
    are the ones the sequential reader makes, so the trace is the same. A gzip is still cut in the parent."""
    path = _plain(shared_traces, tmp_path, name)
    assert_same_trace(load_with(path, 0, monkeypatch), load_with(path, 2, monkeypatch))
    assert (
        readers[-1].direct == [path.name] and readers[-1].sent >= 8 and readers[-1].sequential == []
    )
    gz = path.with_name(path.name + ".gz")
    gz.write_bytes(gzip.compress(path.read_bytes(), compresslevel=1))
    load_with(gz, 2, monkeypatch)
    assert readers[-1].direct == [] and (readers[-1].sent >= 8 or readers[-1].shared == [gz.name])


def test_the_last_separator_is_what_rfind_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end of each piece is found by reading backwards from the piece's end in growing windows: the same
    offset ``data.rfind(sep, 0, end - start)`` gives, including a separator across a window's edge and none."""
    import random

    rng = random.Random(7)
    sep = b"},\n  {"
    data = b"".join(
        rng.choice([b"x" * rng.randrange(1, 40), sep, b"}", b"\n  {"]) for _ in range(3000)
    )
    path = tmp_path / "bytes.json"
    path.write_bytes(data)
    monkeypatch.setattr(pieces.DirectFile, "SEARCH_BYTES", 7)
    fd = os.open(path, os.O_RDONLY)
    with pieces.DirectFile(path, fd, os.fstat(fd)) as direct:
        for _ in range(2000):
            start = rng.randrange(0, len(data))
            end = rng.randrange(start, min(len(data), start + 400) + 1)
            assert direct.last_separator(sep, start, end) == data[start:].rfind(sep, 0, end - start)


def test_a_file_that_changes_while_the_workers_read_it_is_read_in_process(
    tmp_path: Path,
    shared_traces: Path,
    small_pieces: None,
    readers: list,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pieces sent after the file changed (here: grew by a newline) are refused by the workers, and the file is
    read again in process, as it now is."""
    path = _plain(shared_traces, tmp_path, None)  # ~10 pieces, 5 of them sent when it is primed
    monkeypatch.setattr(parallel, "IN_FLIGHT_BYTES", 2 * SMALL)
    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    assert parallel.prime(path)  # the first pieces are cut and sent; the rest wait for the load
    with path.open("ab") as fh:
        fh.write(b"\n")
    changed = load_trace(path)
    assert readers[-1].sequential == [f"{path.name}: the file changed while it was read"]
    assert_same_trace(load_with(path, 0, monkeypatch), changed)


@pytest.mark.slow  # the fast lane reads TRACES[0] in shares already (test_every_shared_trace_reads_the_same...)
@pytest.mark.parametrize("workers", [2, 3])
def test_a_gzip_is_inflated_by_the_workers_themselves_in_shares(
    workers: int,
    shared_traces: Path,
    small_pieces: None,
    readers: list,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each worker inflates the file, cuts it where every reader cuts it and decodes its share of the pieces;
    the parent sends one task per share and reads no byte of it. The trace is the same."""
    path = shared_traces / TRACES[0]
    sequential = load_with(path, 0, monkeypatch)
    assert_same_trace(sequential, load_with(path, workers, monkeypatch))
    (reader,) = readers
    assert reader.shared == [path.name] and reader.sent == workers and reader.sequential == []


@pytest.mark.slow  # the fast lane keeps the equality on one trace, a fallback, the head start
def test_a_shared_gzip_that_cannot_be_cut_is_read_in_process(
    tmp_path: Path, small_pieces: None, readers: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parallel, "SHARE_MIN_BYTES", 1)
    nested = _nested_layout(tmp_path / "nested.json")
    gz = tmp_path / "nested.json.gz"
    gz.write_bytes(gzip.compress(nested.read_bytes(), compresslevel=1))
    one_line = tmp_path / "one_line.json.gz"
    one_line.write_bytes(
        gzip.compress(orjson.dumps(orjson.loads(nested.read_bytes())), compresslevel=1)
    )
    for path, why in (
        (gz, "a piece did not decode at its cut"),
        (one_line, "events are not one per line"),
    ):
        assert_same_trace(load_with(path, 0, monkeypatch), load_with(path, 2, monkeypatch))
        assert readers[-1].shared == [path.name] and readers[-1].sequential == [
            f"{path.name}: {why}"
        ]


@pytest.mark.slow  # the fast lane keeps the equality on one trace, a fallback, the head start
def test_a_shared_gzip_that_changed_while_it_was_read_is_read_in_process(
    shared_traces: Path, small_pieces: None, readers: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers check the file is the one they started on (device, inode, size, mtime): here every look at it
    differs, as if it were being rewritten."""
    from itertools import count

    from profilers.trace import parse_worker

    looks = count()
    monkeypatch.setattr(
        parse_worker, "file_ident", lambda st: (next(looks),)
    )  # inherited by the forked workers
    path = shared_traces / TRACES[0]
    on_workers = load_with(path, 2, monkeypatch)
    assert readers[-1].sequential == [f"{path.name}: the file changed while it was read"]
    assert_same_trace(load_with(path, 0, monkeypatch), on_workers)


def test_the_head_start_leaves_the_importing_process_a_core_on_a_small_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command imports the analysis while the workers read: a small document gets one worker fewer than the
    cores (one on two cores), a large one every core, and STEPWISE_PARSE_WORKERS is taken as it says."""
    monkeypatch.delenv(parallel.WORKERS_ENV, raising=False)
    monkeypatch.setattr(parallel, "SMALL_DOCUMENT_BYTES", 100_000)
    body = orjson.dumps({"traceEvents": [x(f"op{i}", i * 10, 5) for i in range(2000)]})
    small = tmp_path / "small.json.gz"
    small.write_bytes(
        gzip.compress(body[:90_000])
    )  # not a whole document: only its size is read here
    big = tmp_path / "big.json.gz"
    big.write_bytes(gzip.compress(body + b" " * 100_000))
    wrapped = (
        tmp_path / "wrapped.json.gz"
    )  # its size record wrapped past 2**32: smaller than the file itself
    wrapped.write_bytes(big.read_bytes()[:-4] + (5).to_bytes(4, "little"))
    plain = tmp_path / "plain.json"
    plain.write_bytes(body[:90_000])
    assert [parallel.head_start_workers(p, 2) for p in (small, plain, big, wrapped)] == [1, 1, 2, 2]
    assert parallel.head_start_workers(small, 4) == 3 and parallel.head_start_workers(small, 0) == 0
    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    assert parallel.head_start_workers(small, 2) == 2


def test_a_single_worker_inflates_a_primed_gzip_itself(
    shared_traces: Path, small_pieces: None, readers: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On two cores the head start reads a small gzip on one worker, which inflates and decodes it; the parent,
    done importing, joins it for the pieces the worker has not reached: the trace is the sequential reader's."""
    path = shared_traces / TRACES[0]
    sequential = load_with(path, 0, monkeypatch)
    monkeypatch.delenv(parallel.WORKERS_ENV)
    monkeypatch.setattr(parallel, "worker_count", lambda: 2)
    assert parallel.prime(path)
    assert_same_trace(sequential, load_trace(path))
    (reader,) = readers
    assert (
        reader.workers == 1
        and reader.shared == [path.name]
        and reader.sent == 1
        and reader.sequential == []
    )
    assert reader.parent_joins
    assert reader.shipped == (
        1 if hasattr(os, "memfd_create") else 0
    )  # its columns came back by memory file


def _slow_in_workers(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Every piece a worker process decodes takes ``seconds`` longer (the forked workers inherit the patch)."""
    import time

    from profilers.trace import parse_worker

    parent, piece = os.getpid(), parse_worker.piece

    def slow(*args: object, **kwargs: object) -> object:
        if os.getpid() != parent:
            time.sleep(seconds)
        return piece(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(parse_worker, "piece", slow)


@pytest.mark.parametrize("worker_delay", [0.05, 0.0])
def test_the_parent_joins_a_primed_read_and_decodes_what_no_worker_has_reached(
    worker_delay: float,
    shared_traces: Path,
    small_pieces: None,
    readers: list,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pieces go to whoever reaches them first: with a worker slowed down, the parent decodes most of the file;
    either way every piece is decoded once and the trace is the sequential reader's."""
    path = shared_traces / TRACES[0]
    sequential = load_with(path, 0, monkeypatch)
    _slow_in_workers(monkeypatch, worker_delay)
    monkeypatch.delenv(parallel.WORKERS_ENV)
    monkeypatch.setattr(parallel, "worker_count", lambda: 2)
    assert parallel.prime(path)
    on_both = load_trace(path)
    assert_same_trace(sequential, on_both)
    (reader,) = readers
    assert reader.parent_joins and reader.sequential == []
    if worker_delay:
        assert reader.parent_pieces > 0


def test_a_parent_that_joins_after_the_worker_has_every_piece_reads_nothing(
    shared_traces: Path, small_pieces: None, readers: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    path = shared_traces / TRACES[0]
    sequential = load_with(path, 0, monkeypatch)
    monkeypatch.delenv(parallel.WORKERS_ENV)
    monkeypatch.setattr(parallel, "worker_count", lambda: 2)
    assert parallel.prime(path)
    (reader,) = readers
    assert reader._claims is not None
    for _ in range(200):  # the worker reads the whole file while "the imports" take their time
        if reader._claims.finished():
            break
        time.sleep(0.05)
    assert reader._claims.finished()
    assert_same_trace(sequential, load_trace(path))
    assert reader.parent_pieces == 0 and reader.sequential == []


def test_a_share_gets_its_own_pieces_bracketed_and_the_cuts_do_not_move(
    shared_traces: Path, small_pieces: None
) -> None:
    from profilers.trace.sources import plain_file

    def cut(take: object) -> list[tuple[str, object]]:
        stream = plain_file(shared_traces / TRACES[0]).open()
        try:
            first = trace_json.read_start(stream, "t")
            return list(pieces.stream_pieces(first + stream.read(1), stream, "t", take))  # type: ignore[arg-type]
        finally:
            stream.close()

    whole, odd = cut(None), cut(lambda i: i % 2 == 1)
    assert len(whole) == len(odd) > 4 and whole[0] == odd[0] and whole[-1] == odd[-1]
    for i, ((kind, data), (kind2, mine)) in enumerate(zip(whole[1:-1], odd[1:-1])):
        assert kind == kind2 == "piece"
        assert mine == (b"[" + data + b"]" if i % 2 == 1 else None)


@pytest.mark.parametrize("detach", [False, True])
@pytest.mark.slow
def test_a_command_lines_read_does_not_wait_for_its_workers_to_exit(
    detach: bool,
    shared_traces: Path,
    small_pieces: None,
    readers: list,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``prime(detach=True)`` (the command line, which exits after its read) lets the workers go without waiting
    for them once every result is in; any other read waits, so the next read finds no pool thread left."""
    from concurrent.futures import ProcessPoolExecutor

    waits: list[bool] = []
    shutdown = ProcessPoolExecutor.shutdown

    def recorded(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        waits.append(wait)
        shutdown(self, wait=wait, cancel_futures=cancel_futures)

    monkeypatch.setattr(ProcessPoolExecutor, "shutdown", recorded)
    path = shared_traces / TRACES[0]
    sequential = load_with(path, 0, monkeypatch)
    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    assert parallel.prime(path, detach=detach)
    assert_same_trace(sequential, load_trace(path))
    assert waits == [not detach]
    for t in (
        threading.enumerate()
    ):  # the detached pool's thread ends by itself; the tests after this want none
        if type(t).__name__ == "_ExecutorManagerThread" or t.name == "QueueFeederThread":
            t.join(timeout=10)


@pytest.mark.slow
def test_columns_that_cannot_be_mapped_back_send_the_file_to_the_sequential_reader(
    shared_traces: Path, small_pieces: None, readers: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's shipped columns that the parent cannot map (a memory file gone wrong) are not lost: that file is
    read in process, and the reader says why; the memory files are closed and forgotten either way."""
    from profilers.trace import parse_worker

    def unmappable(shipped: object, fds: object) -> object:
        raise parse_worker.Unreadable("a worker's columns could not be mapped (test)")

    monkeypatch.setattr(
        parse_worker, "unship", unmappable
    )  # the parent's side only: workers never call it
    path = shared_traces / TRACES[0]
    sequential = load_with(path, 0, monkeypatch)
    assert_same_trace(sequential, load_with(path, 2, monkeypatch))
    (reader,) = readers
    if hasattr(os, "memfd_create"):
        assert reader.sequential == [f"{path.name}: a worker's columns could not be mapped (test)"]
    assert reader._result_fds == [] and parallel._RESULT_FDS == [] and parallel._CLAIMS is None
