"""What a parse worker process does with the bytes it is sent: decode them and reduce the events to raw columns.

Imported only inside a worker (and by the tests): numpy, msgspec and orjson, never pandas. Each task gets the
exact bytes the sequential reader would decode at that point (:mod:`profilers.trace.json_events`), so the
columns are the same wherever they were made.
"""

from __future__ import annotations

from typing import Any

from profilers.trace.json_events import finish, whole
from profilers.trace.raw_columns import RawColumns, raw_chunk
from profilers.trace.structs import decode_piece


def piece(data: bytes) -> RawColumns:
    """Events cut from the middle of the ``traceEvents`` array (whole events, no brackets).

    Raises ValueError when the bytes are not whole events: the cut was not where the layout promised."""
    return raw_chunk(decode_piece(b"[" + data + b"]"))


def last_piece(data: bytes, label: str) -> tuple[list[RawColumns], dict[str, Any], list[str]]:
    """The end of the document: its last events, the top-level fields after the array, and notes."""
    notes: list[str] = []
    events, tail = finish(data, label, notes)
    return ([raw_chunk(events)] if events else []), tail, notes


def document(data: bytes, label: str) -> tuple[dict[str, Any], list[RawColumns], list[str]]:
    """A small document read whole: its top-level fields, its events' columns, notes."""
    doc = whole(data, label, [])
    return doc.top, [raw_chunk(chunk) for chunk in doc.chunks], doc.notes
