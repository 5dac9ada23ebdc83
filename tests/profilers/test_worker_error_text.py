"""A failed run's stored error: the exception once, then whole traceback lines (seen on an H100: a CUDA OOM's
message twice and a path cut to "ch/nn/modules/module.py")."""

from __future__ import annotations

from profilers.run.worker import _error_text


def _deep(n: int) -> None:
    if n == 0:
        raise RuntimeError(" ".join(["CUDA", "out", "of", "memory.", "Tried", "to", "allocate", "x" * 400]))
    _deep(n - 1)


def test_the_error_keeps_whole_lines_and_says_the_exception_once() -> None:
    try:
        _deep(30)
    except RuntimeError as err:
        text = _error_text(err)
    lines = text.splitlines()
    assert lines[0].startswith("RuntimeError: CUDA out of memory.")
    assert text.count("CUDA out of memory") == 1
    assert all(line == "…" or line.startswith(("  ", "Traceback")) for line in lines[1:])  # no line cut mid-way
    assert len(text) <= len(lines[0]) + 1 + 1500 + 2
