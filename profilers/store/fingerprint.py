"""Keys for analyses: a cheap stat fingerprint of a path, and a content digest of a trace.

A stored run changes while it trains, so its key is the (name, size, mtime) of every file in its folder (what its
stored analysis is checked against, :mod:`advisors.analysis.stored`). An uploaded trace is keyed by its *content*
in the dashboard's cache, so the analysis made while validating the upload (from a temporary copy) is the one the
Analysis page finds for the stored run: the file is parsed once.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

MAX_FILES = 4096
_CHUNK = 1 << 20


def _files(root: Path, exclude: tuple[str, ...] = ()) -> list[tuple[str, Path]]:
    """``(relative name, path)`` of the regular files under ``root`` (itself when it is a file), sorted; names in
    ``exclude`` (relative to ``root``) left out."""
    if root.is_file():
        return [("", root)]
    out: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue  # atomic-write temp files come and go
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if rel not in exclude:
                out.append((rel, p))
            if len(out) >= MAX_FILES:
                return out
    return out


def stat_fingerprint(
    root: Path | str, exclude: tuple[str, ...] = ()
) -> tuple[tuple[str, int, int], ...]:
    """``(relative name, size, mtime_ns)`` of every file under ``root`` but those named in ``exclude``: changes
    when any of them changes."""
    out = []
    for rel, p in _files(Path(root), exclude):
        try:
            st = p.stat()
        except OSError:
            continue
        out.append((rel, st.st_size, st.st_mtime_ns))
    return tuple(out)


def content_digest(root: Path | str) -> str:
    """BLAKE2b of the relative names and bytes of every file under ``root`` (a file: its bytes only)."""
    h = hashlib.blake2b(digest_size=20)
    for rel, p in _files(Path(root)):
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        with open(p, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()
