"""Where in the user's own code something happened: the first stack frame outside torch, Stepwise, Python and
installed libraries (site-packages).

A call site is ``{"file", "line", "code"}`` with the file as the user knows it (absolute path), so the Advisor
can say "change line 41 of train.py" and render a diff against that file. When the object was built by a library
the user's code called (a Hugging Face ``Trainer`` building its DataLoader, Lightning calling the model), the site
is the user's line that called into it and ``via`` names that library (its top-level package): the change then
belongs where the user configures that library (``TrainingArguments(...)``, ``L.Trainer(...)``), never in it.
"""

from __future__ import annotations

import functools
import linecache
import os
import site
import sys
import sysconfig
from types import FrameType
from typing import Any

import torch

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # stepwise_agent/
_TORCH = os.path.realpath(os.path.dirname(os.path.abspath(torch.__file__))) + os.sep


def _library_dirs() -> set[str]:
    paths = sysconfig.get_paths()
    dirs = {paths["purelib"], paths["platlib"]}
    try:
        dirs.update(site.getsitepackages())
    except AttributeError:  # some embedded interpreters' site module has no getsitepackages
        pass
    user = getattr(site, "getusersitepackages", lambda: None)()
    if user:
        dirs.add(user)
    return {os.path.realpath(d) + os.sep for d in dirs if d}


_LIBRARIES = tuple(_library_dirs())
_SKIP_DIRS = tuple(
    {
        _TORCH,
        os.path.realpath(_HERE) + os.sep,
        *_LIBRARIES,
        *(os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")),
    }
)


@functools.lru_cache(maxsize=4096)
def is_user_file(filename: str) -> bool:
    """A file of the user's: not generated (``<string>``), not torch, Stepwise, the standard library or an
    installed package."""
    if not filename or filename.startswith("<"):
        return False
    real = os.path.realpath(filename)
    return not real.startswith(_SKIP_DIRS)


def _library_of(frame: FrameType) -> str | None:
    """The top-level package of an installed library's frame (not torch's), else ``None``."""
    real = os.path.realpath(frame.f_code.co_filename)
    if real.startswith(_TORCH) or not real.startswith(_LIBRARIES):
        return None
    name = str(frame.f_globals.get("__name__") or "")
    return name.split(".")[0] or None


def user_site(
    skip: int = 2, obj: Any = None, frame: FrameType | None = None
) -> dict[str, Any] | None:
    """The innermost frame of the user's code on the current stack (``None`` when there is none), with ``via``:
    the installed library between that frame and here, when one built the object. A library frame that already
    holds ``obj`` (the object under construction) only wraps its constructor, as Lightning wraps
    ``DataLoader.__init__`` to remember its arguments: the user still built it. ``frame``: start there instead
    of ``skip`` frames up."""
    frame = frame if frame is not None else sys._getframe(skip)
    via: str | None = None
    while frame is not None:
        name = frame.f_code.co_filename
        if is_user_file(name):
            line = frame.f_lineno
            out: dict[str, Any] = {
                "file": os.path.abspath(name),
                "line": line,
                "code": linecache.getline(name, line).strip(),
            }
            if via is not None:
                out["via"] = via
            return out
        lib = _library_of(frame)
        if lib is not None and not (
            obj is not None and any(v is obj for v in frame.f_locals.values())
        ):
            via = lib
        frame = frame.f_back
    return None


def called_by_user(skip: int = 2) -> bool:
    """Whether the caller at ``skip`` (generated frames such as a dataclass's ``__init__`` and Stepwise's own
    wrappers passed over) is the user's code, not a library building the object for them."""
    frame: FrameType | None = sys._getframe(skip)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith("<") and not os.path.realpath(name).startswith(
            os.path.realpath(_HERE) + os.sep
        ):
            return is_user_file(name)
        frame = frame.f_back
    return False
