"""Where in the user's own code something happened: the first stack frame outside torch, Stepwise and Python.

A call site is ``{"file", "line", "code"}`` with the file as the user knows it (absolute path), so the Advisor
can say "change line 41 of train.py" and render a diff against that file.
"""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
from typing import Any

import torch

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # profilers/
_SKIP_DIRS = tuple(os.path.realpath(p) + os.sep for p in {
    os.path.dirname(os.path.abspath(torch.__file__)), _HERE,
    sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})


def is_user_file(filename: str) -> bool:
    if not filename or filename.startswith("<"):
        return False
    real = os.path.realpath(filename)
    return not real.startswith(_SKIP_DIRS)


def user_site(skip: int = 2) -> dict[str, Any] | None:
    """The innermost frame of the user's code on the current stack (``None`` when there is none)."""
    frame = sys._getframe(skip)
    while frame is not None:
        name = frame.f_code.co_filename
        if is_user_file(name):
            line = frame.f_lineno
            return {"file": os.path.abspath(name), "line": line,
                    "code": linecache.getline(name, line).strip()}
        frame = frame.f_back  # type: ignore[assignment]
    return None
