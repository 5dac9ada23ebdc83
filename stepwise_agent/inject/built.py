"""Where in the user's code each model was built and moved: the line that ran, so a change to the model
(``torch.compile``) is shown in the branch the run took, not in one it skipped (``if args.type == 'bow':``).

While the script sets up, ``nn.Module.__init__`` notes the user's line that constructed each top-level module
(``model = MLP(config)``; a submodule built inside another module's ``__init__`` is not noted), and
``Module.to`` / ``Module.cuda`` the user's line that moved it (``model.to(args.device)``). Both are kept per
object, weakly, and read when the model is first called: :meth:`BuildSites.site_of` is the line after which the
model is complete (its last move, else its construction), with ``built`` the construction when that differs.
"""

from __future__ import annotations

import functools
import sys
import weakref
from types import FrameType
from typing import Any, Callable

from torch import nn

from stepwise_agent.inject.sites import is_user_file, user_site


def _self_of(frame: FrameType) -> Any:
    """The first argument of the function ``frame`` runs (``self`` of a method), else ``None``."""
    code = frame.f_code
    return frame.f_locals.get(code.co_varnames[0]) if code.co_argcount else None


class BuildSites:
    """Notes construction and move sites per module while installed (see the module docs)."""

    def __init__(self) -> None:
        # by id, with a weak reference to tell a reused id apart: a module is noted while its class's own
        # __init__ still runs, and a class may hash by state it has not set yet (a torchmetrics Metric)
        self.built: dict[int, tuple[weakref.ref[nn.Module], dict[str, Any]]] = {}
        self.moved: dict[int, tuple[weakref.ref[nn.Module], dict[str, Any]]] = {}
        self._undo: list[Callable[[], None]] = []

    def install(self) -> None:
        original_init, original_to, original_cuda = nn.Module.__init__, nn.Module.to, nn.Module.cuda
        me = self

        @functools.wraps(original_init)
        def init(module: nn.Module, *args: Any, **kwargs: Any) -> None:
            original_init(module, *args, **kwargs)
            me._note_built(module)

        @functools.wraps(original_to)
        def to(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
            me._note_moved(module)
            return original_to(module, *args, **kwargs)

        @functools.wraps(original_cuda)
        def cuda(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
            me._note_moved(module)
            return original_cuda(module, *args, **kwargs)

        nn.Module.__init__ = init  # type: ignore[method-assign,assignment]
        nn.Module.to = to  # type: ignore[method-assign,assignment]
        nn.Module.cuda = cuda  # type: ignore[method-assign,assignment]
        self._undo.append(lambda: setattr(nn.Module, "__init__", original_init))
        self._undo.append(lambda: setattr(nn.Module, "to", original_to))
        self._undo.append(lambda: setattr(nn.Module, "cuda", original_cuda))

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def _note_built(self, module: nn.Module) -> None:
        frame: FrameType | None = sys._getframe(2)  # past this method and the patched __init__
        while frame is not None and _self_of(frame) is module:  # the class's own __init__ chain
            frame = frame.f_back
        start, probe = frame, frame
        while probe is not None and not is_user_file(probe.f_code.co_filename):
            if probe.f_code.co_name == "__init__" and isinstance(_self_of(probe), nn.Module):
                return  # a submodule, built by a library's module (a Hugging Face model's layers)
            probe = probe.f_back
        if probe is None or (
            probe.f_code.co_name == "__init__" and isinstance(_self_of(probe), nn.Module)
        ):
            return  # no line of the user's, or a submodule built in the user's own module class
        site = user_site(obj=module, frame=start)
        if site is not None:
            self._keep(self.built, module, site)

    def _note_moved(self, module: nn.Module) -> None:
        caller = sys._getframe(2)  # the line that called .to() / .cuda()
        if not is_user_file(caller.f_code.co_filename) or _self_of(caller) is module:
            return  # a library's move, or the module moving itself in its own method
        site = user_site(obj=module, frame=caller)
        if site is not None:
            self._keep(self.moved, module, site)

    @staticmethod
    def _keep(
        table: dict[int, tuple[weakref.ref[nn.Module], dict[str, Any]]],
        module: nn.Module,
        site: dict[str, Any],
    ) -> None:
        try:
            table[id(module)] = (weakref.ref(module), site)
        except TypeError:  # a module class that cannot be weakly referenced: not noted
            pass

    @staticmethod
    def _get(
        table: dict[int, tuple[weakref.ref[nn.Module], dict[str, Any]]], module: nn.Module
    ) -> dict[str, Any] | None:
        kept = table.get(id(module))
        return kept[1] if kept is not None and kept[0]() is module else None

    def site_of(self, module: nn.Module) -> dict[str, Any] | None:
        """The user's line after which ``module`` is complete — its last move, else its construction — with
        ``built``: where it was constructed, when that is another line; ``None`` when neither was seen."""
        built, moved = self._get(self.built, module), self._get(self.moved, module)
        if moved is None:
            return dict(built) if built is not None else None
        out = dict(moved)
        if built is not None and (built["file"], built["line"]) != (moved["file"], moved["line"]):
            out["built"] = dict(built)
        return out
