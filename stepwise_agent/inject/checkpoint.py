"""``checkpoint_modules``: activation checkpointing of named modules of the script's model, with no
change to its code.

The knob's value names modules of the model the script trains, comma-separated, as the run's
per-module record names them: a dotted path (``blocks.3``, ``encoder.layer``) or a group of
repeated modules with its indices as ``*`` (``blocks.*``: every ``blocks.<i>``), optionally behind
the model's class name (``GPT.blocks.*``, as a record of two models names them). When the model
is first called (:mod:`stepwise_agent.inject.modules` finds it), the ``forward`` of each instance
that matches is wrapped, on the instance only: while the module is in training mode with grad
enabled its forward runs under ``torch.utils.checkpoint.checkpoint(forward, …,
use_reentrant=False)``, which keeps its inputs and recomputes its activations during backward
(the random state is restored for the recomputation, so dropout draws the same mask); in
evaluation or under ``no_grad`` it is the module's own forward. A module inside one already
wrapped is left as it is.

During backward the recomputation calls the block's submodules outside any model call; they are
marked so the model watch does not take them for models (:attr:`CheckpointInjection.inside`).

The report says where it acted (the pattern, how many modules, their names, where their class is
defined, how many checkpointed calls ran) or why not: no module of that name ran, or the modules
ran only in evaluation or without grad. Its ``checkpoint`` site is the line of the user's code
that called the first checkpointed block: where ``checkpoint(block, x)`` belongs.
"""

from __future__ import annotations

import inspect
import os
import re
from typing import Any, Callable

import torch
from torch import nn

from stepwise_agent.inject.modules import set_forward
from stepwise_agent.inject.report import InjectionReport
from stepwise_agent.inject.sites import user_site

KNOB = "checkpoint_modules"
#: a whole dotted segment of digits: the index of a ModuleList or a Sequential
_INDEX = re.compile(r"(?<![^.])\d+(?![^.])")
#: names the report lists before it says "and N more"
LISTED = 4


def patterns_of(value: Any) -> tuple[str, ...]:
    """The knob's value as its patterns: ``"blocks.*, head"`` → ``("blocks.*", "head")``."""
    return tuple(p.strip() for p in str(value or "").split(",") if p.strip())


def grouped(name: str) -> str:
    """``"blocks.3.attn"`` → ``"blocks.*.attn"``."""
    return _INDEX.sub("*", name)


def matches(name: str, pattern: str) -> bool:
    return name == pattern or grouped(name) == pattern


def checkpointed(
    module: nn.Module, original: Callable[..., Any], me: CheckpointInjection, name: str
) -> Callable[..., Any]:
    """``module``'s forward run under ``torch.utils.checkpoint`` while it trains with grad on;
    ``me`` counts the calls and notes where the user's code made the first checkpointed one."""

    def forward(*args: Any, **kwargs: Any) -> Any:
        if module.training and torch.is_grad_enabled():
            from torch.utils import checkpoint as ckpt  # looked up here: the loop counts its calls

            if not me.counts["checkpointed"]:
                me.report.site("checkpoint", user_site(2), module=name)
            me.counts["checkpointed"] += 1
            return ckpt.checkpoint(original, *args, use_reentrant=False, **kwargs)
        me.counts["plain"] += 1
        return original(*args, **kwargs)

    return forward


def _where(cls: type) -> str | None:
    """``defined at model.py:12`` (the class), else ``forward at model.py:20`` (its forward's code:
    a class of a script run as ``__main__`` under the launcher has no module file to read)."""
    try:
        path, line = inspect.getsourcefile(cls), inspect.getsourcelines(cls)[1]
        if path:
            return f"defined at {os.path.basename(path)}:{line}"
    except (OSError, TypeError):
        pass
    code = getattr(getattr(cls, "forward", None), "__code__", None)
    if code is None:
        return None
    return f"forward at {os.path.basename(code.co_filename)}:{code.co_firstlineno}"


class CheckpointInjection:
    """The ``checkpoint_modules`` knob (see the module docs): :meth:`on_model` for each model the
    script trains, :meth:`finish` to decide the report."""

    def __init__(self, knobs: dict[str, Any], report: InjectionReport) -> None:
        self.patterns = patterns_of(knobs.get(KNOB))
        self.report = report
        self.wrapped: dict[str, list[str]] = {p: [] for p in self.patterns}  # pattern -> names
        self.classes: dict[str, set[type]] = {p: set() for p in self.patterns}
        self.inside: set[int] = set()  # ids of the wrapped modules and everything below them
        self.counts = {"checkpointed": 0, "plain": 0}
        self.seen: list[str] = []  # the repeated modules of the models seen, grouped

    def on_model(self, model: nn.Module) -> None:
        """Wrap the forward of every module of ``model`` that a pattern names."""
        if not self.patterns:
            return
        inner = getattr(model, "module", model)  # DistributedDataParallel's inner model
        prefix = type(inner).__name__
        done: list[str] = []
        for name, m in inner.named_modules():
            if not name or any(name.startswith(d + ".") for d in done):
                continue
            if grouped(name) != name and grouped(name) not in self.seen:
                self.seen.append(grouped(name))
            hit = next(
                (p for p in self.patterns if matches(name, p) or matches(f"{prefix}.{name}", p)),
                None,
            )
            if hit is None or id(m) in self.inside:
                continue
            set_forward(m, checkpointed(m, m.forward, self, name))
            self.inside.update(id(s) for s in m.modules())
            self.wrapped[hit].append(name)
            self.classes[hit].add(type(m))
            done.append(name)

    def finish(self) -> None:
        k = self.report.knob(KNOB)
        if k is None or not self.patterns:
            return
        found = {p: names for p, names in self.wrapped.items() if names}
        if not found:
            known = [n for n in self.seen if n.endswith("*")][:LISTED]
            hint = f" (its repeated modules: {', '.join(known)})" if known else ""
            k.refuse(f"no module named {', '.join(self.patterns)} ran{hint}")
            return
        if not self.counts["checkpointed"]:
            k.refuse(
                f"{', '.join(found)} ran only in evaluation or without grad: nothing was "
                "checkpointed"
            )
            return
        for p, names in found.items():
            classes = sorted(self.classes[p], key=lambda c: c.__name__)
            where = [w for w in (_where(c) for c in classes) if w]
            listed = ", ".join(names[:LISTED]) + (
                f" and {len(names) - LISTED} more" if len(names) > LISTED else ""
            )
            kinds = "/".join(c.__name__ for c in classes)
            k.act(
                f"{p}: {len(names)} {kinds} module(s) ({listed})"
                + (f", {', '.join(where)}" if where else "")
                + ", run under torch.utils.checkpoint(use_reentrant=False) while training"
            )
        k.act(
            f"{self.counts['checkpointed']} checkpointed forward call(s): their activations are "
            "recomputed in backward"
        )
        missing = [p for p in self.patterns if p not in found]
        if missing:
            k.evidence.append(f"no module named {', '.join(missing)} ran")
