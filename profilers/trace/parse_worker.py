"""What a parse worker process does with the bytes it is sent: decode them and reduce the events to raw columns.

Imported only inside a worker (and by the tests): numpy, msgspec and orjson, never pandas. Each task gets the
exact bytes the sequential reader would decode at that point (:mod:`profilers.trace.json_events`), so the
columns are the same wherever they were made.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable

from profilers.trace.json_events import finish, read_start, whole
from profilers.trace.pieces import PARENT, Claims, file_ident, stream_pieces
from profilers.trace.sources import plain_file
from profilers.trace.raw_columns import RawColumns, merge, raw_chunk
from profilers.trace.structs import decode_piece


def piece(data: bytes | bytearray, bracketed: bool = False) -> RawColumns:
    """Events cut from the middle of the ``traceEvents`` array (whole events, inside the array's brackets only
    when ``bracketed``).

    Raises ValueError when the bytes are not whole events: the cut was not where the layout promised."""
    return raw_chunk(decode_piece(data if bracketed else b"[" + data + b"]"))


def keep_freed_memory() -> None:
    """A worker's first act (glibc only; elsewhere nothing): keep the memory it frees for its next allocations.

    A worker allocates and frees pieces and the events decoded from them; by default glibc hands each freed
    block of a few MiB or more back to the kernel and the next one is faulted in again, page by page. Keeping
    them (blocks up to 32 MiB from the heap, the heap not trimmed) cut a worker's page faults on the 216k-event
    trace by a quarter (49k to 36k) and its CPU time by ~4 % when pieces were 8 MiB; with today's 1 MiB
    pieces the difference is within noise, and it still spares a worker the kernel round trips of a large
    document's top or last piece. A worker lives for one read, so nothing is held for long."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3  # glibc's <malloc.h>
    mallopt(m_mmap_threshold, 32 * 1024**2)
    mallopt(m_trim_threshold, 512 * 1024**2)
    mallopt(m_top_pad, 16 * 1024**2)


class Unreadable(ValueError):
    """A byte range could not be read as the parent cut it (the file changed, vanished or failed): the parent
    reads that file in process instead, and says why."""


def piece_at(path: str, offset: int, length: int, ident: tuple[int, ...]) -> RawColumns:
    """:func:`piece` of bytes the worker reads itself: ``length`` bytes at ``offset`` of an uncompressed file,
    read straight into the array brackets (one copy, where a piece sent through a pipe costs several)."""
    buf = bytearray(length + 2)
    buf[0], buf[-1] = 0x5B, 0x5D  # "[" ... "]"
    _read_into(path, offset, memoryview(buf)[1:-1], ident)
    return raw_chunk(decode_piece(buf))


def last_piece_at(
    path: str, offset: int, length: int, ident: tuple[int, ...], label: str
) -> tuple[list[RawColumns], dict[str, Any], list[str]]:
    """:func:`last_piece` of the file's last ``length`` bytes from ``offset``."""
    buf = bytearray(length)
    _read_into(path, offset, memoryview(buf), ident)
    return last_piece(bytes(buf), label)


def _read_into(path: str, offset: int, view: memoryview, ident: tuple[int, ...]) -> None:
    """Fill ``view`` from ``path`` at ``offset``. ValueError when the file is not the one the parent cut (replaced,
    grown, truncated) or cannot be read (:class:`Unreadable`): the parent then reads the file in process, which
    says what is wrong with it if anything is."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as err:
        raise Unreadable(f"a worker could not open it ({err.strerror})") from None
    try:
        if file_ident(os.fstat(fd)) != ident:
            raise Unreadable("the file changed while it was read")
        done = 0
        while done < len(view):
            n = os.preadv(fd, [view[done:]], offset + done)
            if n <= 0:
                raise Unreadable("the file ended early while it was read")
            done += n
    except OSError as err:
        raise Unreadable(f"a worker could not read it ({err.strerror})") from None
    finally:
        os.close(fd)


def last_piece(data: bytes, label: str) -> tuple[list[RawColumns], dict[str, Any], list[str]]:
    """The end of the document: its last events, the top-level fields after the array, and notes."""
    notes: list[str] = []
    events, tail = finish(data, label, notes)
    return ([raw_chunk(events)] if events else []), tail, notes


def document(data: bytes, label: str) -> tuple[dict[str, Any], list[RawColumns], list[str]]:
    """A small document read whole: its top-level fields, its events' columns, notes."""
    doc = whole(data, label, [])
    return doc.top, [raw_chunk(chunk) for chunk in doc.chunks], doc.notes


def share(path: str, label: str, k: int, shares: int) -> tuple[Any, ...]:
    """Share ``k`` of ``shares`` of a compressed file the workers read without the parent: each worker inflates
    the whole file itself (ISA-L: ~0.03 s for the 216k-event trace's 51 MiB), cuts it where every reader cuts it
    (:func:`profilers.trace.pieces.stream_pieces`) and decodes pieces ``k``, ``k + shares``, ... The parent
    neither inflates nor copies a byte. ``("whole", document or None)`` for a document small enough to read at
    once (share 0 reads it), else ``("parts", top, [(first piece index, columns)], tail, notes)``, each run of
    consecutive pieces merged. Raises what reading
    raises (:class:`profilers.trace.pieces.CutFallback`, ValueError at a bad cut, TraceError); the parent then
    reads the file in process."""
    return read_share(path, label, k, lambda i: i % shares == k)


def claimed_share(path: str, label: str, who: int, claims: Claims) -> tuple[Any, ...]:
    """:func:`share` of the pieces ``who`` claims first (:class:`profilers.trace.pieces.Claims`): a worker
    (``who``: its share number) or the parent, which joins once it is free and stops as soon as a worker has
    passed the file's end. Share 0 reads a whole small document."""
    if who == PARENT:
        return read_share(path, label, who, claims.taker(who), stop=claims.finished)
    try:
        return read_share(path, label, who, claims.taker(who), at_end=claims.finish)
    finally:
        claims.finish()  # also when reading failed: the parent stops too (the file is then read in process)


def read_share(
    path: str,
    label: str,
    k: int,
    take: Callable[[int], bool],
    stop: Callable[[], bool] | None = None,
    at_end: Callable[[], None] | None = None,
) -> tuple[Any, ...]:
    """The pieces ``take`` accepts (by index from 0; called once per piece, in order), as :func:`share` returns
    them; share ``k`` 0 reads a whole small document. ``stop``: asked before each piece; True ends the read there
    (the pieces not yet reached are someone else's). ``at_end``: called once the last piece is claimed or not,
    before it is decoded (every piece then has its reader)."""
    before = file_ident(os.stat(path))
    stream = plain_file(Path(path)).open()
    try:
        first = read_start(stream, label)
        more = stream.read(1)
        if not more:
            return "whole", (document(first, label) if k == 0 else None)
        top: dict[str, Any] = {}
        parts: list[tuple[int, RawColumns]] = []
        tail: dict[str, Any] = {}
        notes: list[str] = []
        pieces = stream_pieces(first + more, stream, label, take=take, stop=stop)
        for n, (kind, data) in enumerate(pieces, start=-1):
            if kind == "top":
                top = data
            elif kind == "piece":
                if (
                    data is not None
                ):  # ours, bracketed; the other shares' pieces are not even copied
                    parts.append((n, piece(data, bracketed=True)))
            else:
                mine = take(n)
                if at_end is not None:
                    at_end()
                if not mine:
                    continue
                last, tail, notes = last_piece(data, label)
                parts.extend((n, cols) for cols in last)
    finally:
        stream.close()
    if file_ident(os.stat(path)) != before:
        raise Unreadable("the file changed while it was read")
    return "parts", top, _runs_merged(parts), tail, notes


def _runs_merged(parts: list[tuple[int, RawColumns]]) -> list[tuple[int, RawColumns]]:
    """Each run of consecutive pieces as one set of columns, under its first piece's index (merging is
    associative, so the parent's merge of all of them gives the same columns). A share's pieces are mostly one
    run: sent as ~50 small column sets, they cost the 216k-event trace's worker ~4 ms more to pickle and the
    parent ~3 ms more to unpickle and merge, on the command's critical path."""
    runs: list[list[tuple[int, RawColumns]]] = []
    for n, cols in parts:
        if runs and runs[-1][-1][0] == n - 1:
            runs[-1].append((n, cols))
        else:
            runs.append([(n, cols)])
    return [(run[0][0], merge([cols for _, cols in run])) for run in runs]


# -- handing a share's columns back through shared memory ------------------------------------------------------
#
# A share's result is the whole file's columns (~10 MB for the 216k-event trace). Returned through the pool's
# pipe it was pickled into one bytes object, written 64 KiB at a time, read back by the parent's result thread
# and unpickled: 17-32 ms from the worker's return to the parent's hands, on the command's critical path. Shipped,
# the arrays' bytes go out of band (pickle protocol 5) into a memory file the parent made before forking
# (``os.memfd_create``: anonymous, freed with its last descriptor) and the parent maps them: only a few kB of
# pickle cross the pipe, and the arrays are read where the worker wrote them.


def ship(result: Any, fds: list[int], k: int) -> tuple[Any, ...]:
    """Share ``k``'s ``result`` written to its memory file ``fds[k]``: ``("shipped", k, pickle with out-of-band
    buffers, their sizes)``, or ``result`` itself when it cannot be written there."""
    import pickle

    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(result, protocol=5, buffer_callback=buffers.append)
    sizes: list[int] = []
    fd = fds[k]
    try:
        os.ftruncate(fd, 0)
        for b in buffers:
            view = b.raw()
            done = 0
            while done < view.nbytes:
                done += os.write(fd, view[done:])
            sizes.append(view.nbytes)
    except OSError:
        return result
    return "shipped", k, head, sizes


def unship(shipped: tuple[Any, ...], fds: list[int]) -> Any:
    """The result :func:`ship` wrote to its share's file in ``fds``, its arrays on the file's pages (mapped, not
    copied). Raises :class:`Unreadable` when the file cannot be mapped (the parent then reads the trace in
    process)."""
    import mmap
    import pickle

    _, k, head, sizes = shipped
    fd = fds[k]
    total = sum(sizes)
    if total == 0:
        return pickle.loads(head, buffers=[b""] * len(sizes))
    try:
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        view = memoryview(mmap.mmap(fd, total, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE))
    except (OSError, ValueError) as err:
        raise Unreadable(f"a worker's columns could not be mapped ({err})") from None
    buffers, at = [], 0
    for n in sizes:
        buffers.append(view[at : at + n])
        at += n
    return pickle.loads(head, buffers=buffers)
