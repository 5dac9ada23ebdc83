"""Read trace files on every core: worker processes decode the events and make raw columns.

Decoding JSON holds the GIL, so threads cannot share it; processes can, if what comes back is small. Every file
is cut exactly where the sequential reader would cut it (:mod:`profilers.trace.pieces`: whole events of at most
``CHUNK_BYTES``, cut at the writer's own separator); a worker decodes each piece and sends back its numpy columns
(:mod:`profilers.trace.parse_worker`), a fraction of the piece's size. Results are put back in file order, so
the trace is the same one the sequential reader builds; a test holds them equal on every shared trace. Three
ways to get the pieces to the workers, whichever moves fewest bytes through the parent:

- an uncompressed file on disk: the parent finds each cut by reading backwards from the piece's end to its last
  separator and sends the byte range; the worker reads it itself (``os.preadv``, straight into the array
  brackets). On a 1 GB trace ``analyze`` took 8.1 s instead of 9.7-10.6 s (interleaved, bytecode not cached).
- a gzip file on disk of at least ``SHARE_MIN_BYTES``: the parent reads nothing; each of up to ``MAX_SHARES``
  workers inflates the whole file, cuts it and decodes its share of the pieces. On the 216k-event trace
  ``analyze`` took 0.67 s instead of 0.72 s (interleaved medians of 12, bytecode cached): the parent no longer
  inflates and pipes 51 MiB on its own critical path. A share is every n-th piece when several files are read,
  and for a single file the pieces each worker reaches first (:class:`profilers.trace.pieces.Claims`), which
  lets the parent of a head start join the read once its imports are done (``parent_joins``) and a slowed worker
  take fewer; a single file's workers hand their columns back through a memory file
  (:func:`profilers.trace.parse_worker.ship`), not the pool's pipe.
- anything else (a zip member, a smaller gzip): the parent reads and decompresses it (under the limits of
  :mod:`profilers.trace.sources`) and sends each piece through the pipe.

A worker that finds a file changed (device, inode, size or mtime) refuses it and the file is read in process.

When it is used: more than one core (``STEPWISE_PARSE_WORKERS`` sets how many workers; 0 or 1 turns it off),
a document larger than ``WHOLE_LIMIT`` (smaller ones are read whole, in process), and a process with no other
thread: workers are forked, and forking a threaded process (the dashboard's server) can deadlock, so there the
reader stays sequential. What falls back to the sequential reader, for that file only: a document whose events
are not one per line (no separator to cut at), a piece that does not decode at its cut, no separator within a
piece's bytes. A worker that dies (killed, out of memory) sends every file not yet read back to the sequential
reader. At most ``IN_FLIGHT_BYTES`` of pieces (or ``2 x workers + 1`` pieces) are in flight, so memory stays bounded
on a gigabyte file.

:func:`prime` lets a command line start the first pieces before it imports pandas, and so overlap the two.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Generator, Iterator

from profilers.trace import json_events
from profilers.trace.json_events import parse_document, read_start
from profilers.trace.pieces import (
    PARENT,
    Claims,
    CutFallback,
    DirectFile,
    byte_ranges,
    direct_file,
    stream_pieces,
)
from profilers.trace.sources import GZIP_MAGIC, TraceFile, find_trace_files

if TYPE_CHECKING:
    from profilers.trace.raw_columns import RawColumns

WORKERS_ENV = "STEPWISE_PARSE_WORKERS"
MAX_WORKERS = 8
WORKER_DOCUMENT_BYTES = (
    1024**2
)  # a whole document this large goes to a worker when there are several files
SHARE_MIN_BYTES = (
    1024**2
)  # a gzip this large on disk is inflated by the workers themselves (see share)
MAX_SHARES = (
    4  # each share inflates the whole file: beyond a few, the repeated inflating outweighs the gain
)
IN_FLIGHT_BYTES = (
    64 * 1024**2
)  # pieces sent and not yet back: 64 MiB (the 216k-event trace's 51 MiB at once)


@dataclass
class RawDocument:
    """One file read: its top-level fields, its events' raw columns in file order, and notes."""

    top: dict[str, Any]
    parts: list[RawColumns]
    notes: list[str] = field(default_factory=list)


def worker_count() -> int:
    """How many parse workers this process would use (0: read in process)."""
    env = os.environ.get(WORKERS_ENV)
    if env is not None:
        try:
            wanted = int(env)
        except ValueError:
            wanted = 0
    else:
        wanted = min(
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else os.cpu_count() or 1,
            MAX_WORKERS,
        )
    if wanted < 2 or threading.active_count() > 1:
        return 0
    return wanted


def read_sequential(f: TraceFile) -> RawDocument:
    """One file by the sequential reader (the reference the parallel one matches)."""
    from profilers.trace.raw_columns import raw_chunk

    stream = f.open()
    try:
        doc = parse_document(stream, f.name)
        parts = [raw_chunk(chunk) for chunk in doc.chunks]
        return RawDocument(
            doc.top, parts, doc.notes
        )  # top and notes are complete once the chunks are read
    finally:
        stream.close()


def read_documents(files: list[TraceFile]) -> Iterator[tuple[TraceFile, RawDocument]]:
    """Every file's document, in order: on worker processes when :func:`worker_count` allows, else in process."""
    workers = worker_count()
    if workers < 2:
        return ((f, read_sequential(f)) for f in files)
    return ParallelReader(files, workers).documents()


# -- the parallel reader ---------------------------------------------------------------------------------------


def _task(kind: str, data: Any, label: str) -> Any:
    """Run in a worker (the parent imported the worker's module before forking it)."""
    import gc

    from profilers.trace import parse_worker

    gc.disable()  # millions of short-lived objects without cycles: the collector only slows decoding down

    if kind == "piece":
        return parse_worker.piece(data)
    if kind == "piece_at":
        path, offset, length, ident = data
        return parse_worker.piece_at(path, offset, length, ident)
    if kind == "last":
        return parse_worker.last_piece(data, label)
    if kind == "share":
        path, name, k, shares = data
        return parse_worker.share(path, name, k, shares)
    if kind == "claimed":
        path, name, k = data
        assert _CLAIMS is not None  # made before the workers forked (ParallelReader._start_pool)
        result = parse_worker.claimed_share(path, name, k, _CLAIMS)
        return parse_worker.ship(result, _RESULT_FDS, k) if k < len(_RESULT_FDS) else result
    if kind == "last_at":
        path, offset, length, ident = data
        return parse_worker.last_piece_at(path, offset, length, ident, label)
    return parse_worker.document(data, label)


def _assemble(shares: list[tuple[Any, ...]]) -> RawDocument:
    """One document from its shares' results (see :func:`profilers.trace.parse_worker.share`), share 0's first:
    pieces back in file order; the tail fields and notes come from the share that read the last piece."""
    if shares[0][0] == "whole":
        return RawDocument(*shares[0][1])
    parts = sorted((p for result in shares for p in result[2]), key=lambda p: p[0])
    doc = RawDocument(dict(shares[0][1]), [cols for _, cols in parts])
    for _, _, _, tail, notes in shares:
        doc.top.update(tail)
        doc.notes.extend(notes)
    return doc


def _unreadable(err: ValueError) -> bool:
    from profilers.trace.parse_worker import Unreadable

    return isinstance(err, Unreadable)


def _memory_files(n: int) -> list[int]:
    """``n`` anonymous memory files (Linux ``memfd_create``), or none where there are none to make."""
    fds: list[int] = []
    try:
        for k in range(n):
            fds.append(os.memfd_create(f"stepwise-share-{k}", os.MFD_CLOEXEC))
    except (AttributeError, OSError):
        for fd in fds:
            os.close(fd)
        return []
    return fds


_CLAIMS: Claims | None = (
    None  # the claim table of the one file the current pool's workers share (fork-inherited)
)
_RESULT_FDS: list[
    int
] = []  # a memory file per share of that file, its columns handed back there (fork-inherited)


class ParallelReader:
    """Reads ``files`` with ``workers`` forked processes. :meth:`prime` starts work; :meth:`documents` finishes it.

    ``parent_joins``: the parent reads a shared file too, once it asks for the documents (:meth:`documents`),
    taking the pieces no worker has reached (:class:`profilers.trace.pieces.Claims`): for a reader started while
    the parent had other work (imports), with fewer workers than cores."""

    def __init__(self, files: list[TraceFile], workers: int, parent_joins: bool = False) -> None:
        self.files = files
        self.workers = workers
        self.parent_joins = parent_joins
        self.detach = (
            False  # a command line's one read (prime(detach=True)): its workers are not waited for
        )
        self._claims: Claims | None = (
            None  # one file, shared: its pieces go to whoever reaches them first
        )
        self._result_fds: list[
            int
        ] = []  # where each share's worker leaves its columns (parse_worker.ship)
        self._window = max(2 * workers + 1, IN_FLIGHT_BYTES // json_events.CHUNK_BYTES)
        self._pool: ProcessPoolExecutor | None = None
        self._queue: deque[tuple[str, int, Any]] = (
            deque()
        )  # (what, file index, its data): see _documents
        self._in_flight = 0
        self._items = self._produce()
        self._produced_all = False
        self.sent = 0  # tasks sent to workers
        self.max_in_flight = 0
        self.sequential: list[str] = []  # files read in process instead, and why
        self.direct: list[str] = []  # uncompressed files the workers read byte ranges of themselves
        self.shared: list[str] = []  # compressed files the workers inflated themselves, in shares
        self.parent_pieces = 0  # pieces of a shared file the parent decoded itself (parent_joins)
        self.shipped = 0  # shares whose columns came back through a memory file (parse_worker.ship)

    # The producer: reads and cuts, in file order, and says what each file needs.

    def _produce(self) -> Generator[tuple[str, int, Any], None, None]:
        for i, f in enumerate(self.files):
            try:
                yield from self._produce_file(i, f)
            except CutFallback as why:
                yield "inline", i, str(why)
                continue
            except (
                Exception
            ) as err:  # the same error the sequential reader raises for this file, in its turn
                yield "error", i, err
                return
            yield "end", i, None

    def _produce_file(self, i: int, f: TraceFile) -> Iterator[tuple[str, int, Any]]:
        shares = self._shares(f)
        if shares:  # the workers (or the one worker) inflate, cut and decode it themselves: the parent reads nothing
            self.shared.append(f.name)
            yield "share_start", i, None
            for k in range(shares):
                if (
                    len(self.files) == 1
                ):  # one file: its pieces are claimed as reached, by workers and parent
                    yield "claimed", i, (str(f.path), f.name, k)
                else:
                    yield "share", i, (str(f.path), f.name, k, shares)
            return
        stream = f.open()
        try:
            first = read_start(stream, f.name)
            more = stream.read(1)
            if not more:
                if len(self.files) > 1 and len(first) >= WORKER_DOCUMENT_BYTES:
                    yield "document", i, first
                else:
                    yield (
                        "whole",
                        i,
                        first,
                    )  # small: read whole, in process, as the sequential reader does
                return
            direct = direct_file(f, first + more)
            if direct is None:
                yield from self._pieces(i, f.name, first + more, stream)
                return
            stream.close()
            self.direct.append(f.name)
            with direct:
                yield from self._spans(i, f.name, first + more, direct)
        finally:
            stream.close()

    def _shares(self, f: TraceFile) -> int:
        """How many workers share ``f`` (:func:`profilers.trace.parse_worker.share`), 0 for none: a gzip file on
        disk of at least ``SHARE_MIN_BYTES`` (with a single worker, that worker reads it all). The parent would
        otherwise inflate it alone and pipe every piece out; on the 216k-event trace that was ~0.1 s of the
        parent's ~0.7 s, on its critical path."""
        if f.path is None:
            return 0
        try:
            with open(f.path, "rb") as fh:
                head = fh.read(2)
                size = os.fstat(fh.fileno()).st_size
        except OSError:
            return 0
        return (
            min(self.workers, MAX_SHARES) if head == GZIP_MAGIC and size >= SHARE_MIN_BYTES else 0
        )

    def _pieces(
        self, i: int, label: str, buf: bytes, stream: BinaryIO
    ) -> Iterator[tuple[str, int, Any]]:
        for kind, data in stream_pieces(buf, stream, label):
            yield kind, i, data

    def _spans(
        self, i: int, label: str, buf: bytes, direct: DirectFile
    ) -> Iterator[tuple[str, int, Any]]:
        for kind, data in byte_ranges(buf, direct, label):
            yield kind, i, data

    # The consumer: submits within the window and puts results back in order.

    def prime(self) -> None:
        """Fork the workers and send them the first pieces (up to the window) now: they decode while the caller
        goes on (imports, say). Reading is done here, not on a thread: a thread reading while the caller imports
        waited on the GIL for most of the imports (measured: its first piece left 0.25 s late)."""
        self._fill()

    def _start_pool(self) -> ProcessPoolExecutor:
        """The worker processes, forked here (in the caller's thread, before any thread of ours exists)."""
        if self._pool is None:
            # The workers' module (numpy, the column code) is imported once, here, and every forked worker
            # shares it: imported in each worker instead, it cost two workers 0.27 s of CPU on the 216k trace.
            from profilers.trace import parse_worker  # noqa: F401

            global _CLAIMS, _RESULT_FDS
            if len(self.files) == 1:
                self._claims = _CLAIMS = Claims()  # before the fork, so that the workers share it
                self._result_fds = _RESULT_FDS = _memory_files(min(self.workers, MAX_SHARES))
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=get_context("fork"),
                initializer=parse_worker.keep_freed_memory,
            )
            self._pool.submit(
                int
            ).result()  # a fork-context pool forks all its workers at its first task
        return self._pool

    def _submit(self, kind: str, data: Any, label: str) -> Future[Any]:
        pool = self._start_pool()
        self._in_flight += 1
        self.sent += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)
        return pool.submit(_task, kind, data, label)

    def _fill(self) -> None:
        while not self._produced_all and self._in_flight < self._window:
            try:
                kind, i, x = next(self._items)
            except StopIteration:
                self._produced_all = True
                return
            if kind in ("piece", "last", "document", "piece_at", "last_at", "share", "claimed"):
                self._queue.append(("future", i, (kind, self._submit(kind, x, self.files[i].name))))
            else:
                self._queue.append((kind, i, x))

    def documents(self) -> Iterator[tuple[TraceFile, RawDocument]]:
        finished = False
        try:
            yield from self._documents()
            finished = True
        finally:
            # A command line that exits after this read does not wait for its workers to exit; any other reader
            # does, so that the next read in the process finds no pool thread left and may use workers again.
            self.close(wait=not (finished and self.detach))

    def close(self, wait: bool = True) -> None:
        """Stop reading and let the workers go (what is in flight is dropped). ``wait=False`` (every result in
        hand): the workers are told to go and reaped in the background; waiting for them to exit took ~6 ms of
        the command's critical path."""
        self._items.close()
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)
            self._pool = None
        for fd in self._result_fds:
            os.close(
                fd
            )  # the columns mapped from it stay readable: a mapping outlives its descriptor
        global _CLAIMS, _RESULT_FDS
        if (
            _RESULT_FDS is self._result_fds
        ):  # ours: no later pool's workers inherit closed descriptors
            _CLAIMS, _RESULT_FDS = None, []
        self._result_fds = []

    def _documents(self) -> Iterator[tuple[TraceFile, RawDocument]]:
        done = 0  # files handed out so far
        try:
            for item in self._results():
                done += 1
                yield item
        except (
            BrokenProcessPool
        ):  # a worker died (killed, out of memory): the rest is read in process
            self.sequential.extend(f"{f.name}: a worker died" for f in self.files[done:])
            yield from self._sequential_from(done)

    def _results(self) -> Iterator[tuple[TraceFile, RawDocument]]:
        """Each file's document, in order. What the queue holds: ``top`` (a streamed file's header fields), a
        ``future`` (a piece on a worker), ``whole`` (a small file's bytes), ``inline`` (read this file in
        process, and why), ``end`` (the file's document is complete), ``error`` (what reading a file raised)."""
        doc = RawDocument({}, [])
        failed = False
        shares: list[tuple[Any, ...]] | None = None  # a shared file's results, in share order
        joined: tuple[Any, ...] | None = (
            None  # the parent's own share of the current file (parent_joins)
        )
        while True:
            self._fill()
            if not self._queue:
                return
            what, i, x = self._queue.popleft()
            if what == "error":
                raise x
            if what in ("top", "share_start"):
                doc, failed, joined = RawDocument(dict(x or {}), []), False, None
                shares = [] if what == "share_start" else None
            elif what == "future":
                self._in_flight -= 1
                kind, fut = x
                try:
                    if kind == "claimed" and self.parent_joins and joined is None and not failed:
                        joined = self._join(i)  # while the workers read theirs
                    result: Any = (
                        self._received(fut.result())
                        if kind in ("share", "claimed")
                        else fut.result()
                    )
                except (
                    ValueError,
                    CutFallback,
                ) as err:  # a cut that was not between events, say: in process
                    if not failed:
                        why = (
                            str(err)
                            if isinstance(err, CutFallback) or _unreadable(err)
                            else "a piece did not decode at its cut"
                        )
                        self.sequential.append(f"{self.files[i].name}: {why}")
                    failed = True
                    continue
                if failed:
                    continue
                if kind in ("share", "claimed"):
                    assert shares is not None
                    shares.append(result)
                elif kind in ("piece", "piece_at"):
                    doc.parts.append(result)
                elif kind in ("last", "last_at"):
                    parts, tail, notes = result
                    doc.parts.extend(parts)
                    doc.top.update(tail)
                    doc.notes.extend(notes)
                else:
                    doc = RawDocument(*result)
            elif what == "whole":
                from profilers.trace import (
                    parse_worker,
                )  # a small file: read whole, here, as a worker would

                doc, failed, shares = (
                    RawDocument(*parse_worker.document(x, self.files[i].name)),
                    False,
                    None,
                )
            elif what == "inline":
                self.sequential.append(f"{self.files[i].name}: {x}")
                yield self.files[i], read_sequential(self.files[i])
            elif what == "end":
                if failed:
                    doc = read_sequential(self.files[i])
                elif shares is not None:
                    doc = _assemble(shares + ([joined] if joined is not None else []))
                yield self.files[i], doc

    def _received(self, result: tuple[Any, ...]) -> tuple[Any, ...]:
        """A share's result as the worker returned it, or read from the memory file it was shipped to."""
        if result[0] != "shipped":
            return result
        from profilers.trace import parse_worker

        self.shipped += 1
        return parse_worker.unship(result, self._result_fds)

    def _join(self, i: int) -> tuple[Any, ...]:
        """The parent's own share of shared file ``i``: the pieces no worker has reached yet."""
        from profilers.trace import parse_worker

        assert self._claims is not None
        f = self.files[i]
        if self._claims.finished():  # the workers have every piece already: nothing to inflate
            return "parts", {}, [], {}, []
        mine = parse_worker.claimed_share(str(f.path), f.name, PARENT, self._claims)
        self.parent_pieces += self._claims.taken_by(
            PARENT
        )  # (its result holds runs of pieces, merged)
        return mine

    def _sequential_from(self, start: int) -> Iterator[tuple[TraceFile, RawDocument]]:
        """A worker died: every file from ``start`` on is read in process."""
        self._items.close()
        self._queue.clear()
        self._in_flight = 0
        self._produced_all = True
        for f in self.files[start:]:
            yield f, read_sequential(f)


# -- a head start for a command line ---------------------------------------------------------------------------

_PRIMED: dict[str, ParallelReader] = {}
PRIME_MIN_BYTES = 1024**2


def prime(path: str | os.PathLike[str], detach: bool = False) -> bool:
    """Start reading a large trace file on worker processes now, before the caller imports the analysis;
    :func:`take_primed` hands the reader to the load that follows. Only a single ``.json``/``.json.gz`` file
    of at least ``PRIME_MIN_BYTES`` on disk, and only where :func:`worker_count` allows workers (how many:
    :func:`head_start_workers`). True if started. ``detach``: the caller exits after this one read (a command
    line), so the read does not wait for its workers to exit once it has their results."""
    p = Path(path)
    try:
        if (
            not p.is_file()
            or p.stat().st_size < PRIME_MIN_BYTES
            or not p.name.endswith((".json", ".json.gz"))
        ):
            return False
    except OSError:
        return False
    cores = worker_count()
    workers = head_start_workers(p, cores)
    if workers < 1:
        return False
    files = find_trace_files(p)
    # A core left to the imports is the parent's again once they are done: it joins the read then.
    reader = ParallelReader(files, workers, parent_joins=workers < cores)
    reader.detach = detach
    reader.prime()
    _PRIMED[_key(p)] = reader
    return True


SMALL_DOCUMENT_BYTES = (
    128 * 1024**2
)  # a document this small parses in about the time the analysis imports


def head_start_workers(p: Path, workers: int) -> int:
    """How many workers read ``p`` while the command imports the analysis: one core fewer than :func:`worker_count`
    for a document of at most ``SMALL_DOCUMENT_BYTES`` (uncompressed), unless ``STEPWISE_PARSE_WORKERS`` says.

    The importing process is busy for its whole head start (numpy, pandas and the rules: ~0.4 s of CPU), so a
    worker on every core makes three processes share two cores: each of two workers inflated and cut the
    216k-event trace's 51 MiB itself (the parent reads nothing), about 0.15 s of CPU that one worker alone does
    not spend, and the importing process, the command's critical path, ran at two thirds of a core while they
    did. On a small document the one worker is done before the imports are; a larger one is worth every core."""
    if workers < 2 or os.environ.get(WORKERS_ENV) is not None:
        return workers
    return workers - 1 if _document_bytes(p) <= SMALL_DOCUMENT_BYTES else workers


def _document_bytes(p: Path) -> int:
    """The uncompressed size of a ``.json`` or ``.json.gz`` file: a gzip's own record of it (its last four bytes,
    the size modulo 2**32), unless that is smaller than the compressed file (it wrapped: a document of 4 GiB or
    more); on any doubt, a size beyond ``SMALL_DOCUMENT_BYTES``."""
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if fh.read(2) != GZIP_MAGIC:
                return size
            fh.seek(-4, os.SEEK_END)
            isize = int.from_bytes(fh.read(4), "little")
    except OSError:
        return SMALL_DOCUMENT_BYTES + 1
    return isize if isize >= size else SMALL_DOCUMENT_BYTES + 1


def take_primed(path: str | os.PathLike[str], files: list[TraceFile]) -> ParallelReader | None:
    """The reader :func:`prime` started for this path, if it reads the same files."""
    reader = _PRIMED.pop(_key(Path(path)), None)
    if reader is not None and [f.name for f in reader.files] != [f.name for f in files]:
        reader.close()  # not the same input after all
        return None
    return reader


def _key(p: Path) -> str:
    try:
        return str(p.resolve())
    except OSError:
        return str(p)
