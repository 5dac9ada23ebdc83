"""A failing script's error as its user reads it: colour codes stripped, the traceback cut to the user's own
frames (library frames counted, not shown), "rank N raised" only when there are ranks, and a missing module
said together with the interpreter that looked for it (the first thing a user with two environments needs)."""

from __future__ import annotations

import re
from typing import Any, Mapping

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line \d+')
_LIBRARY = re.compile(
    r"[/\\](?:site|dist)-packages[/\\]|[/\\]lib[/\\]python\d+\.\d+[/\\](?!site-packages)"
)


def strip_ansi(text: str) -> str:
    """``"\\x1b[31mError\\x1b[0m"`` → ``"Error"`` (rich/colorama tracebacks, coloured logs)."""
    return _ANSI.sub("", text)


def own_frames(traceback_text: str) -> str:
    """The traceback with library frames (site-packages, the standard library) left out and counted; the
    innermost frame stays when every frame is a library's (the error must point somewhere)."""
    lines = strip_ansi(traceback_text).splitlines()
    frames: list[tuple[int, int, bool]] = []  # (first line, end line, library)
    i = 0
    while i < len(lines):
        m = _FRAME.match(lines[i])
        if m:
            j = i + 1
            while j < len(lines) and lines[j].startswith("    "):
                j += 1
            frames.append((i, j, bool(_LIBRARY.search(m.group("file")))))
            i = j
        else:
            i += 1
    if not frames:
        return "\n".join(lines)
    library = [f for f in frames if f[2]]
    drop = {f[0] for f in library} if len(library) < len(frames) else {f[0] for f in library[:-1]}
    out: list[str] = []
    i = 0
    starts = {f[0]: f for f in frames}
    while i < len(lines):
        if i in starts and i in drop:
            i = starts[i][1]
            continue
        out.append(lines[i])
        i += 1
    if drop:
        out.append(
            f"({len(drop)} library frame(s) left out: site-packages and the standard library)"
        )
    return "\n".join(out)


def describe_rank_error(
    first: Mapping[str, Any], others: int, world_size: int, interpreter: str | None = None
) -> str:
    """The run's error from the first rank's ``rank{R}.error.json``: "ValueError: …" for one process, "rank 3
    raised ValueError: …" for several; a ``ModuleNotFoundError`` names ``interpreter``."""
    kind, message = str(first.get("type")), strip_ansi(str(first.get("message")))
    who = f"rank {first.get('rank')} raised " if world_size > 1 else ""
    more = f" ({others} other rank(s) raised too)" if others else ""
    where = (
        f" (the script ran under {interpreter}: install it there, or run with that environment's python)"
        if kind in ("ModuleNotFoundError", "ImportError") and interpreter
        else ""
    )
    return f"{who}{kind}: {message}{where}{more}\n{own_frames(str(first.get('traceback') or ''))}".strip()
