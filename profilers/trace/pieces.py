"""Where a large trace document is cut into pieces for the parse workers: the sequential reader's own cuts
(:func:`profilers.trace.json_events._chunks`: whole events of at most ``CHUNK_BYTES``, cut at the writer's
separator, the end of the file a last piece of at most ``CHUNK_BYTES``), made from a stream of the document's
bytes (:func:`stream_pieces`) or, for an uncompressed file on disk, from its byte offsets (:func:`byte_ranges`,
reading only where each piece ends). Where that reader would look for a cut another way, :class:`CutFallback`
says why and the file is read by it instead; :class:`Claims` says which reader of a shared file takes which
piece. Used by the parent (:mod:`profilers.trace.parallel`) and by the workers that inflate a gzip themselves
(:func:`profilers.trace.parse_worker.share`); no numpy, no pandas.
"""

from __future__ import annotations

import mmap
import os
from multiprocessing import get_context
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from profilers.trace import json_events
from profilers.trace.json_events import events_start, separator
from profilers.trace.sources import TraceFile


class CutFallback(Exception):
    """This file is read by the sequential reader instead (its layout does not allow cutting)."""


def file_ident(st: os.stat_result) -> tuple[int, ...]:
    """What tells one version of a file from another: device, inode, size, modification time."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def stream_pieces(
    buf: bytes,
    stream: BinaryIO,
    label: str,
    take: Callable[[int], bool] | None = None,
    stop: Callable[[], bool] | None = None,
) -> Iterator[tuple[str, Any]]:
    """``("top", header fields)``, then ``("piece", bytes)`` ... and ``("last", bytes)``: the document's events
    array cut where the sequential reader cuts it. ``buf``: the document's first bytes, ``stream`` the rest.

    With ``take`` (a worker's share: which pieces, by index from 0, it decodes), a piece taken comes as a
    ``bytearray`` already inside the array's brackets (``[...]``, ready to decode: one copy of its bytes where
    slicing and then bracketing made two) and a piece not taken as None (not copied at all); the cuts are the
    same. ``stop``, asked before each piece: True ends the pieces there, with no ``last``."""
    top, pos = events_start(buf, label, [])
    buf = buf[pos:]
    sep = separator(buf)
    if sep is None:
        raise CutFallback("events are not one per line")
    yield "top", top
    data = bytearray(
        buf
    )  # deleting a bytearray's head is O(1), and appending amortised: no copies but the pieces
    eof = False
    n = 0  # the next piece's index
    while True:
        if stop is not None and stop():
            return
        if not eof and len(data) < 2 * json_events.CHUNK_BYTES:
            more = stream.read(json_events.CHUNK_BYTES)
            eof = not more
            data += more
        if eof and len(data) <= json_events.CHUNK_BYTES:
            yield "last", bytes(data)
            return
        at = data.rfind(sep, 0, json_events.CHUNK_BYTES)
        if (
            at <= 0
        ):  # an event longer than a chunk, or another layout: the sequential reader's cases
            raise CutFallback("an event longer than a piece, or a change of layout")
        if take is None:
            yield "piece", bytes(memoryview(data)[: at + 1])
        else:
            yield "piece", _bracketed(data, at + 1) if take(n) else None
        n += 1
        del data[: at + len(sep) - 1]


def _bracketed(data: bytearray, length: int) -> bytearray:
    """``[`` + the first ``length`` bytes of ``data`` + ``]``, in one copy."""
    out = bytearray(length + 2)
    out[0], out[-1] = 0x5B, 0x5D
    out[1:-1] = memoryview(data)[:length]
    return out


def byte_ranges(buf: bytes, direct: DirectFile, label: str) -> Iterator[tuple[str, Any]]:
    """:func:`stream_pieces` for an uncompressed file on disk: the same cuts, found by reading only the end of
    each piece's window (its last separator), as ``("piece_at" | "last_at", (path, offset, length, ident))``
    that a worker reads itself."""
    top, pos = events_start(buf, label, [])
    sep = separator(buf[pos:])
    if sep is None:
        raise CutFallback("events are not one per line")
    yield "top", top
    chunk, size = json_events.CHUNK_BYTES, direct.size
    while True:
        if size - pos <= chunk:
            yield "last_at", (direct.name, pos, size - pos, direct.ident)
            return
        at = direct.last_separator(sep, pos, pos + chunk)
        if at <= 0:  # as in stream_pieces: an event longer than a chunk, or another layout
            raise CutFallback("an event longer than a piece, or a change of layout")
        yield "piece_at", (direct.name, pos, at + 1, direct.ident)
        pos += at + len(sep) - 1


class DirectFile:
    """An uncompressed trace file on disk, open for reads at any offset (see :func:`_direct_file`)."""

    SEARCH_BYTES = (
        64 * 1024
    )  # a piece's end is searched for its last separator in this much, then more

    def __init__(self, path: Path, fd: int, st: os.stat_result) -> None:
        self.name, self.fd, self.size, self.ident = str(path), fd, st.st_size, file_ident(st)

    def last_separator(self, sep: bytes, start: int, end: int) -> int:
        """Where the last ``sep`` lying wholly within ``[start, end)`` begins, relative to ``start`` (-1: none):
        what ``data.rfind(sep, 0, end - start)`` says of the bytes from ``start``, read from the end backwards."""
        width = self.SEARCH_BYTES
        while True:
            lo = max(start, end - width)
            at = os.pread(self.fd, end - lo, lo).rfind(sep)
            if at >= 0:
                return lo - start + at
            if lo == start:
                return -1
            width *= 4

    def __enter__(self) -> DirectFile:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def direct_file(f: TraceFile, head: bytes) -> DirectFile | None:
    """``f`` open for byte-range reads when it is an uncompressed file on disk whose bytes are the ones its stream
    gave (``head``) and within the size limit (beyond it, the stream raises the limit's error in its turn)."""
    from profilers.trace.sources import MAX_TRACE_BYTES

    if f.path is None or not hasattr(os, "preadv"):
        return None
    try:
        fd = os.open(f.path, os.O_RDONLY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        prefix = head[
            : DirectFile.SEARCH_BYTES
        ]  # a compressed file's stream differs from its bytes at once
        if st.st_size <= MAX_TRACE_BYTES and os.pread(fd, len(prefix), 0) == prefix:
            return DirectFile(f.path, fd, st)
    except OSError:
        pass
    os.close(fd)
    return None


# -- claims: which reader takes which piece of a shared file ---------------------------------------------------

SIZE = 1 << 20  # pieces a table covers (1 MiB of shared memory): 1 TiB of events at 1 MiB a piece
WORKER, PARENT = 0, 254  # who takes a piece: a worker's share number (0, 1, ...) or the parent


class Claims:
    """Which pieces of one file are taken, and whether a worker has reached the file's end (every piece taken):
    the readers of a shared file share its pieces as they go, whoever comes to a piece first decoding it.

    A command line starts one worker on a large trace while it imports the analysis
    (:func:`profilers.trace.parallel.prime`); the parent's core is busy with the imports then, and idle once they
    are done. With claims the parent joins the read at that point: it inflates and cuts the same file
    (:func:`profilers.trace.parse_worker.claimed_share`), skips the pieces the worker has taken and takes the rest
    as it reaches them, so the two finish together however far the worker got meanwhile. Static shares (every
    other piece) cannot do that: they fit a head start of one known length, on an idle machine.

    The table is shared memory made before the workers fork (they inherit it); a lock makes each
    claim a test-and-set, so no piece is decoded twice or never. Pieces beyond the table (a document of more than
    ``SIZE`` pieces) all go to the first worker (share 0). Workers sharing a file claim its pieces the same way, so
    one slowed by the machine's other work simply takes fewer.
    """

    def __init__(self) -> None:
        # An anonymous shared mapping (the workers inherit it at fork; the kernel zero-fills its pages as they are
        # touched): byte 0 says a worker passed the end, bytes 1.. who took each piece. Made before the fork, on
        # the command's critical path: multiprocessing's RawArray cost ~3 ms there (ctypes imported, 1 MiB set).
        self._table = mmap.mmap(-1, SIZE + 1)
        self._lock = get_context("fork").Lock()

    def take(self, n: int, who: int) -> bool:
        """Take piece ``n`` for ``who`` (a worker's share number, or ``PARENT``); False if another has it."""
        if n >= SIZE:
            return who == WORKER
        with self._lock:
            if self._table[n + 1]:
                return False
            self._table[n + 1] = who + 1
            return True

    def taker(self, who: int) -> Callable[[int], bool]:
        return lambda n: self.take(n, who)

    def finish(self) -> None:
        """A worker has passed the file's last piece: every piece is taken, by one reader or another."""
        self._table[0] = 1

    def finished(self) -> bool:
        return bool(self._table[0])

    def taken_by(self, who: int) -> int:
        """How many pieces ``who`` took (for tests and notes)."""
        with self._lock:
            return self._table[1:].count(bytes([who + 1]))
