"""Seeds that differ per to-quality seed: the script's own seeding calls get the arm's offset.

Most scripts pin their randomness at the top (``torch.manual_seed(0)``, ``set_seed(args.seed)``,
``L.seed_everything(42)``): seeded once by the launcher before the script starts, they re-seed themselves with the
same number, and K "seeds" of an arm are one run K times. With ``STEPWISE_SEED_OFFSET=k`` in the environment (set by
``optimize --to-quality`` for seed k), each of the script's calls to

- ``torch.manual_seed``, ``random.seed``, ``numpy.random.seed``,
- ``transformers.set_seed`` (also what a ``Trainer`` calls with ``TrainingArguments.seed``),
- ``lightning.seed_everything`` / ``pytorch_lightning.seed_everything`` (``lightning_fabric``'s too)

runs with ``seed + k`` instead (seed 0 is the script's own run, unchanged). A call made inside another of these
(``seed_everything`` seeds torch, random and numpy itself) is left to the outer one: one offset per call of the
script's. Every call changed is recorded in ``RUN_DIR/seeds.json`` (``{"offset": k, "changed": [{"call", "asked",
"used", "site"}], "calls": n}``), written as it happens so a run stopped from outside keeps it. A
``torch.Generator().manual_seed(...)`` is the script's own stream (often its fixed data) and is left alone.

Libraries imported later are patched right after they load (:class:`~stepwise_agent.inject.frameworks.
_PatchAfterImport`, the framework switches' import hook), before a ``from … import set_seed`` can bind the original.
"""

from __future__ import annotations

import functools
import os
import random
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch

from stepwise_agent.inject.frameworks import _PatchAfterImport
from stepwise_agent.inject.sites import user_site
from stepwise_agent.recorder import write_json_atomic

ENV = "STEPWISE_SEED_OFFSET"
FILE = "seeds.json"
MAX_RECORDED = 20  # a script that reseeds every step: the first calls say what happened
# module → (attribute, the call's name in the record); patched after the module loads
LATER: dict[str, tuple[tuple[str, str], ...]] = {
    "numpy.random": (("seed", "numpy.random.seed"),),
    "transformers.trainer_utils": (("set_seed", "transformers.set_seed"),),
    "lightning.fabric.utilities.seed": (("seed_everything", "lightning.seed_everything"),),
    "lightning_fabric.utilities.seed": (("seed_everything", "lightning.seed_everything"),),
}


def offset_from_env() -> int | None:
    """The arm's offset asked for in the environment (``None``: seeds are left as the script sets them)."""
    raw = os.environ.get(ENV)
    try:
        return int(raw) if raw not in (None, "") else None
    except ValueError:
        return None


class SeedOffsets:
    """Wraps the seeding calls (see the module docs); :meth:`uninstall` puts the originals back."""

    def __init__(self, offset: int, run_dir: Path, write: bool = True) -> None:
        self.offset, self.run_dir, self.write = offset, run_dir, write
        self.changed: list[dict[str, Any]] = []
        self.calls = 0
        self._inside = threading.local()
        self._undo: list[Callable[[], None]] = []

    def install(self) -> None:
        self._patch(torch, "manual_seed", "torch.manual_seed")
        self._patch(torch.random, "manual_seed", "torch.manual_seed")
        self._patch(random, "seed", "random.seed")
        patches: dict[str, Callable[[ModuleType], None]] = {
            name: functools.partial(self._patch_module, attrs=attrs)
            for name, attrs in LATER.items()
        }
        for name in [
            n for n in patches if n in sys.modules
        ]:  # already imported (numpy, by torch or a site hook)
            patches.pop(name)(sys.modules[name])
        finder = _PatchAfterImport(patches)
        sys.meta_path.insert(0, finder)
        self._undo.append(lambda: sys.meta_path.remove(finder) if finder in sys.meta_path else None)
        self._write()

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "changed": list(self.changed), "calls": self.calls}

    def _patch_module(self, module: ModuleType, attrs: tuple[tuple[str, str], ...]) -> None:
        for attr, name in attrs:
            if hasattr(module, attr):
                self._patch(module, attr, name)

    def _patch(self, owner: Any, attr: str, name: str) -> None:
        original = getattr(owner, attr)
        if getattr(original, "__stepwise_seed__", False):
            return  # torch.manual_seed is torch.random.manual_seed: wrapped once
        me = self

        @functools.wraps(original)
        def seeded(*args: Any, **kwargs: Any) -> Any:
            if getattr(me._inside, "on", False):
                return original(
                    *args, **kwargs
                )  # inside another seeding call: the outer one has the offset
            args, kwargs, asked, used = me._offset(args, kwargs)
            me._inside.on = True
            try:
                return original(*args, **kwargs)
            finally:
                me._inside.on = False
                if asked is not None and used is not None:
                    me._record(name, asked, used)

        seeded.__stepwise_seed__ = True  # type: ignore[attr-defined]
        setattr(owner, attr, seeded)
        self._undo.append(lambda: setattr(owner, attr, original))

    def _offset(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any], int | None, int | None]:
        """The call's arguments with the seed offset (the first argument or ``seed=``); an absent or non-integer
        seed (``random.seed()`` from the clock, ``seed_everything()`` from the environment) is left alone."""
        if args:
            asked = args[0]
        elif "seed" in kwargs:
            asked = kwargs["seed"]
        else:
            return args, kwargs, None, None
        try:
            value = int(asked)
        except (TypeError, ValueError, OverflowError):
            return args, kwargs, None, None
        if isinstance(asked, bool) or value != asked:
            return args, kwargs, None, None
        used = (value + self.offset) % 2**32
        if args:
            return (used, *args[1:]), kwargs, value, used
        return args, {**kwargs, "seed": used}, value, used

    def _record(self, name: str, asked: int, used: int) -> None:
        self.calls += 1
        if len(self.changed) < MAX_RECORDED:
            site = user_site(3)
            self.changed.append(
                {
                    "call": name,
                    "asked": asked,
                    "used": used,
                    "site": f"{os.path.basename(site['file'])}:{site['line']}" if site else None,
                }
            )
        self._write()

    def _write(self) -> None:
        if not self.write:
            return
        try:
            write_json_atomic(self.run_dir / FILE, self.to_json())
        except OSError:  # a record that cannot be written does not stop the training
            pass


def install_if_asked(run_dir: Path, leader: bool) -> SeedOffsets | None:
    """Offsets the script's seeding calls when the launcher asked (:data:`ENV`); only the leader writes the file."""
    offset = offset_from_env()
    if offset is None:
        return None
    seeds = SeedOffsets(offset, run_dir, write=leader)
    seeds.install()
    return seeds
