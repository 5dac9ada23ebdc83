"""Patches on torch's own functions that undo themselves: what the agent's observers install and take back."""

from __future__ import annotations

import functools
from typing import Any, Callable


class Patches:
    """Attributes replaced by wrappers, each with its undo, taken back last-installed first."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def _patch(
        self, owner: Any, name: str, wrapper: Callable[[Callable[..., Any]], Callable[..., Any]]
    ) -> None:
        original = getattr(owner, name)
        setattr(owner, name, functools.wraps(original)(wrapper(original)))
        self._undo.append(lambda: setattr(owner, name, original))
