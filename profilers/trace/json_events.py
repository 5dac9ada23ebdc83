"""Parse a Chrome/Kineto trace JSON document into (top-level fields, chunks of events), in bounded memory.

Small documents are parsed whole. Large ones are parsed ``CHUNK_BYTES`` at a time: the ``traceEvents``
array is cut between two events and each piece is parsed on its own, so peak memory is one chunk's objects,
not the whole document's. A cut is accepted only when the piece parses; a cut inside a string or a nested
object cannot, so the next earlier candidate is tried. Pieces decode into typed events first
(:mod:`profilers.trace.structs`), else into orjson dicts. What strict JSON forbids but real writers emit
(NaN/Infinity, integers beyond 64 bits, stray non-UTF-8 bytes) falls back to the standard library parser;
the broken events are then dropped, and counted, by the column code.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterator

import orjson

from profilers.errors import TraceError
from profilers.trace.structs import decode_document, decode_piece

# Pieces parse faster than one whole document (cache-friendly, short-lived objects) and keep peak memory to a few
# pieces' worth of Python objects; the smaller the faster, down to about 1 MiB, below which a read on workers pays
# for its many tasks. Medians of 5 fresh processes (benchmarks/reading/piece_size.py, in
# benchmarks/results/piece_size-2026-11-26.txt), pieces of 8 MiB / 1 MiB / 512 KiB / 256 KiB: one worker's
# whole read of the 216k-event trace 0.384 / 0.260 / 0.265 / 0.260 s, the sequential reader 0.454 / 0.310 /
# 0.299 / 0.308 s, a 387 MiB uncompressed trace on two workers 1.29 / 1.03 / 1.12 / 1.27 s. Small pieces also let
# a late reader share a file evenly (profilers.trace.pieces.Claims). An event longer than a piece is a piece of
# its own here; the parallel reader then reads that file in process (profilers.trace.pieces).
WHOLE_LIMIT = 8 * 1024**2  # documents up to this size are parsed in one go
CHUNK_BYTES = 1024**2  # beyond it, the events array is parsed this many bytes at a time
MAX_EVENT_BYTES = 512 * 1024**2  # a single "event" larger than this is not a trace event
_KEY = b'"traceEvents"'
_CUT = re.compile(rb"\}\s*,\s*\{")
_WS = b" \t\r\n"
_WALK_BYTES = 64 * 1024  # the end of the document walked first, to find where the events close
_FALLBACK_CLOSES = 16  # "]"s tried from the end when what follows the events array is not JSON
# A string or a bracket in the document read backwards (bytes reversed): there an escaped quote is
# a quote followed by an odd number of backslashes. Written unrolled ("[^"]*(?:escaped[^"]*)*")
# so that it cannot backtrack.
_BACK_TOKEN = re.compile(rb'"[^"]*(?:"(?=\\(?:\\\\)*(?!\\))[^"]*)*"|[\[\]{}]')


@dataclass
class ParsedDocument:
    """What the reader needs: top-level fields (at least ``distributedInfo``, ``deviceProperties``,
    ``computeProperties`` when present) and the event chunks (typed ``trace_structs.Event``s or dicts)."""

    top: dict[str, Any]
    chunks: Iterator[list[Any]]
    notes: list[str]


def _loads(data: bytes, label: str, notes: list[str]) -> Any:
    """orjson first; on failure the standard library, which also takes what real writers emit that strict
    JSON forbids (NaN/Infinity, integers beyond 64 bits); stray non-UTF-8 bytes are replaced (and noted)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as err:
        strict_error = err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
        notes.append(f"{label}: bytes that are not UTF-8 were replaced with U+FFFD")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise TraceError(f"{label}: not valid JSON ({_short(strict_error)})") from None


def _short(err: Exception) -> str:
    text = str(err)
    return text if len(text) < 160 else text[:157] + "..."


def parse_document(stream: BinaryIO, label: str) -> ParsedDocument:
    """Read a trace document from ``stream``. Raises TraceError for anything that is not a trace."""
    first = read_start(stream, label)
    more = stream.read(1)
    notes: list[str] = []
    if not more:
        return whole(first, label, notes)
    return _streamed(first + more, stream, label, notes)


def read_start(stream: BinaryIO, label: str) -> bytes:
    """The first ``WHOLE_LIMIT`` bytes of a document, checked to be the start of JSON."""
    first = stream.read(WHOLE_LIMIT)
    if not first.strip(_WS):
        raise TraceError(f"{label}: the file is empty")
    if first.lstrip(_WS)[:1] not in (b"{", b"["):
        raise TraceError(f"{label}: not JSON (it does not start with '{{' or '[')")
    return first


def whole(data: bytes, label: str, notes: list[str]) -> ParsedDocument:
    """A document read whole (small enough to hold its events at once)."""
    fast = decode_document(data)
    if fast is not None:
        return ParsedDocument(fast[0], iter([fast[1]]), notes)
    doc = _loads(data, label, notes)
    if isinstance(doc, list):
        return ParsedDocument({}, iter([doc]), notes)
    if not isinstance(doc, dict):
        raise TraceError(
            f"{label}: valid JSON but not a trace (a {type(doc).__name__}, not an object)"
        )
    if "traceEvents" not in doc:
        raise TraceError(f"{label}: valid JSON but not a trace (no 'traceEvents' key)")
    events = doc.pop("traceEvents")
    if not isinstance(events, list):
        raise TraceError(f"{label}: 'traceEvents' is a {type(events).__name__}, not a list")
    return ParsedDocument(doc, iter([events]), notes)


def _streamed(buf: bytes, stream: BinaryIO, label: str, notes: list[str]) -> ParsedDocument:
    top, pos = events_start(buf, label, notes)
    return ParsedDocument(top, _chunks(buf[pos:], stream, label, top, notes), notes)


def events_start(buf: bytes, label: str, notes: list[str]) -> tuple[dict[str, Any], int]:
    """The top-level fields before the events array of a large document, and where its first event starts."""
    stripped = buf.lstrip(_WS)
    if stripped[:1] == b"[":
        return {}, len(buf) - len(stripped) + 1
    key = buf.find(_KEY)
    if key < 0:
        raise TraceError(f"{label}: no 'traceEvents' array near the start of this large file")
    top = _parse_header(buf[:key], label, notes)
    pos = key + len(_KEY)
    while pos < len(buf) and buf[pos] in b" \t\r\n:":
        pos += 1
    if buf[pos : pos + 1] != b"[":
        raise TraceError(f"{label}: 'traceEvents' is not a list")
    return top, pos + 1


def _parse_header(head: bytes, label: str, notes: list[str]) -> dict[str, Any]:
    text = head.rstrip(_WS).rstrip(b",")
    parsed = _loads(text + b"}", label, notes) if text.strip(_WS) != b"{" else {}
    if not isinstance(parsed, dict):
        raise TraceError(f"{label}: the top level is not a JSON object")
    return parsed


def separator(buf: bytes) -> bytes | None:
    """The exact bytes between two top-level events when the writer puts each event on its own lines
    (Kineto: ``},\n  {``): learned from the indentation of the first event; None for one-line arrays."""
    first = buf.find(b"{")
    line_start = buf.rfind(b"\n", 0, first)
    if first < 0 or line_start < 0 or buf[line_start + 1 : first].strip(b" \t"):
        return None
    return b"},\n" + buf[line_start + 1 : first] + b"{"


def _chunks(
    buf: bytes, stream: BinaryIO, label: str, top: dict[str, Any], notes: list[str]
) -> Iterator[list[Any]]:
    """Yield lists of events; fills ``top`` with the fields that follow the array (e.g. traceName).

    Pieces are whole events of at most ``CHUNK_BYTES`` (one event longer than that is a piece of its own), and
    the end of the file is read as a last piece of at most ``CHUNK_BYTES``: :mod:`profilers.trace.parallel` cuts
    at the same places, so keep the two loops alike."""
    sep = separator(buf)
    eof = need_more = False
    while True:
        if not eof and (need_more or len(buf) < 2 * CHUNK_BYTES):
            more = stream.read(CHUNK_BYTES)
            eof = not more
            buf += more
        if eof and len(buf) <= CHUNK_BYTES:
            break
        cut_events, rest = _cut(buf, sep, CHUNK_BYTES)
        if (
            cut_events is None
        ):  # an event longer than a chunk: the longest prefix of whole events there is
            cut_events, rest = _cut(buf, sep, len(buf))
        if cut_events is not None:
            yield cut_events
            buf, need_more = rest, False
        elif eof:
            break
        elif len(buf) > MAX_EVENT_BYTES:
            raise TraceError(
                f"{label}: no event boundary in {MAX_EVENT_BYTES // 1024**2} MiB; not a Kineto trace"
            )
        else:
            need_more = True
    events, tail = finish(buf, label, notes)
    top.update(tail)
    if events:
        yield events


def _cut(buf: bytes, sep: bytes | None, limit: int) -> tuple[list[Any] | None, bytes]:
    """Parse the longest prefix of whole events within ``buf[:limit]``; return them and the rest."""
    if sep is not None:
        at = buf.rfind(sep, 0, limit)
        if at > 0:
            try:
                return decode_piece(b"[" + buf[: at + 1] + b"]"), buf[at + len(sep) - 1 :]
            except ValueError:
                pass  # the writer's layout is not what it seemed: fall back to the general search
    tries = 0
    end = min(len(buf), limit)
    while tries < 8:
        brace = buf.rfind(b"}", 0, end)
        if brace < 0:
            return None, buf
        m = _CUT.match(buf, brace)
        if m is None:
            end = brace
            continue
        tries += 1
        try:
            events = decode_piece(b"[" + buf[: brace + 1] + b"]")
        except ValueError:
            end = brace
            continue
        return events, buf[m.end() - 1 :]
    return None, buf  # no clean cut yet: read more and try again


def finish(buf: bytes, label: str, notes: list[str]) -> tuple[list[Any], dict[str, Any]]:
    """At end of file: the last events, then ``]`` and maybe more top-level fields and ``}``.

    The events array ends at the first ``]`` of the top-level object's own (not inside a string
    or a nested value) whose events decode. Whatever follows it (traceName, deviceProperties,
    arrays of log lines of any length and depth...) is walked over from the end of the document,
    never tried as events."""
    close, events = _strict_end(buf)
    if close < 0:  # not strict JSON (NaN, huge integers, bad bytes): the likeliest end, leniently
        close = _lenient_close(buf, label)
        events = _loads(b"[" + buf[:close] + b"]", label, notes)  # lenient, or a clear error
    return events, _tail_fields(buf[close + 1 :])


def _strict_end(buf: bytes) -> tuple[int, Any]:
    """(where the events array closes, its last events) by the strict decoder, or (-1, None).

    The walk reads a window at the end of ``buf`` first, larger ones only when no end decodes
    there: what follows the array is usually small. A window may start inside a string, so its far
    end can yield a "]" that is not one; that costs a failed decode only, since the events decode
    strictly at their own end alone (before it the array is open, after it other fields follow)."""
    tried: set[int] = set()
    window = _WALK_BYTES
    while True:
        start = max(0, len(buf) - window)
        for close in _object_closes(buf, start):
            if close not in tried and _after_event(buf, close):
                tried.add(close)
                try:
                    return close, decode_piece(b"[" + buf[:close] + b"]")
                except ValueError:
                    continue
        if start == 0:
            break
        window *= 8  # each walk at most 8x the last: all of them together ~1.15x the largest
    # A tail the walk cannot follow (not JSON): the last few "]" whatever follows them.
    for close in _last_closes(buf, _FALLBACK_CLOSES):
        if close not in tried:
            try:
                return close, decode_piece(b"[" + buf[:close] + b"]")
            except ValueError:
                continue
    return -1, None


def _lenient_close(buf: bytes, label: str) -> int:
    """The events array's likeliest end when no end decodes strictly: the earliest ``]`` of the
    top-level object's own that follows an event (the later ones close arrays after it), else the
    last ``]``."""
    earliest = -1
    for close in _object_closes(buf, 0):
        if _after_event(buf, close):
            earliest = close
    if earliest >= 0:
        return earliest
    last = _last_closes(buf, 1)
    if not last:
        raise TraceError(f"{label}: the trace is truncated (the 'traceEvents' array never closes)")
    return last[0]


def _object_closes(buf: bytes, start: int) -> Iterator[int]:
    """Where the document's top-level arrays close, from its end backwards: the ``]`` at depth one
    (inside the top-level object only), or the final ``]`` of a bare array. ``buf`` starts among
    the events, so the walk passes the events array's ``]`` and then its events, where the depth
    never returns to one; it stops where the brackets do not balance (a truncated document) or at
    ``start``. Strings are skipped whole (read backwards, a quote followed by an odd number of
    backslashes is escaped)."""
    rev = buf[start:][::-1]
    depth = 0
    for m in _BACK_TOKEN.finditer(rev):
        tok = rev[m.start()]
        if tok == 0x22:  # '"': a string
            continue
        if tok in (0x5D, 0x7D):  # "]" or "}": a value closes (read backwards, it opens)
            if tok == 0x5D and depth <= 1:
                yield len(buf) - 1 - m.start()
            depth += 1
        else:
            depth -= 1
            if depth < 0:
                return


def _after_event(buf: bytes, close: int) -> bool:
    """Whether the ``]`` at ``close`` can end an array of events: an event's ``}`` before it, or
    nothing."""
    before = buf[max(0, close - 4096) : close].rstrip(_WS)
    return before.endswith(b"}") or (not before and not buf[:close].strip(_WS))


def _last_closes(buf: bytes, count: int) -> list[int]:
    closes: list[int] = []
    end = len(buf)
    while len(closes) < count and (close := buf.rfind(b"]", 0, end)) >= 0:
        closes.append(close)
        end = close
    return closes


def _tail_fields(after: bytes) -> dict[str, Any]:
    """The top-level fields after the events array (``, "traceName": ..., "INFO": [...] }``), if
    they are valid JSON."""
    tail = after.strip(_WS)
    if not tail.startswith(b","):
        return {}
    try:
        parsed = orjson.loads(b"{" + tail[1:])
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
