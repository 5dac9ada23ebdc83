"""Closure optimizers (``LBFGS``, Lightning's automatic optimization) run the forward and backward *inside*
``optimizer.step(closure)``: the profiler's ``Optimizer.step#…`` span then encloses the whole step, and a
breakdown that trusted it would call forward and backward "optimizer".

A process-wide optimizer step pre-hook wraps the closure it is given in a profiler annotation,
:data:`CLOSURE_MARK`; the trace engine (:mod:`profilers.trace.breakdown_parts`) takes that span out of the
optimizer's time, so operators inside it count as forward and backward and the optimizer keeps only its own
update. The mark is plain text on purpose: this package imports nothing of Stepwise's analysis side.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

#: The annotation around a closure's forward and backward; ``profilers.trace.kernel_classes.CLOSURE`` matches it.
CLOSURE_MARK = "stepwise::optimizer_closure"


def _annotated(closure: Callable[[], Any]) -> Callable[[], Any]:
    if getattr(closure, "__stepwise_closure__", False):
        return closure

    @functools.wraps(closure)
    def run() -> Any:
        with torch.profiler.record_function(CLOSURE_MARK):
            return closure()

    setattr(run, "__stepwise_closure__", True)
    return run


def _pre_hook(
    optimizer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, Any] | None:
    """torch calls global pre-hooks with the step's ``(self, *args)`` and kwargs; returning both replaces them."""
    if callable(kwargs.get("closure")):
        return args, {**kwargs, "closure": _annotated(kwargs["closure"])}
    if len(args) > 1 and callable(args[1]):
        return (args[0], _annotated(args[1]), *args[2:]), kwargs
    return None


def annotate_closures() -> Callable[[], None]:
    """Install the pre-hook; returns its removal. A torch without global step hooks is left as it is."""
    try:
        from torch.optim.optimizer import register_optimizer_step_pre_hook
    except ImportError:
        return lambda: None
    handle = register_optimizer_step_pre_hook(_pre_hook)
    return handle.remove
