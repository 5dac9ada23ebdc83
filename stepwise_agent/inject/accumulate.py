"""Gradient accumulation injected into the script's own optimizer (the ``grad_accum`` knob, k).

The optimizer's ``step`` and ``zero_grad`` are replaced on the instance (as bound methods, so an LR scheduler
built afterwards can still wrap ``step`` the way torch's does): ``step()`` really steps only at every k-th call,
dividing each ``p.grad`` by k first (the k micro-batches' mean gradient, as one batch k times larger would
give); ``zero_grad()`` zeroes only at a boundary — before any ``step()`` call, or right after a real step — so the
backward passes in between add up, whichever order the loop calls them in (``zero_grad(); backward(); step()``,
or ``backward(); step(); zero_grad()``, where a zero after a skipped step would throw that micro-batch away). Each skipped call still ends one of the script's steps for the step
detector (``on_skipped_step``), so a run's steps stay the script's own ``optimizer.step()`` calls.

This works only "where the script allows": gradients must reach the optimizer through its own ``zero_grad``.
A script that clears them another way (``model.zero_grad()``, ``p.grad = None``, ``p.grad.zero_()``) would
throw the micro-batches away. To see that, a few parameters (:data:`WITNESSES`) are watched: at each skipped
step their gradient's fingerprint is kept, and a tensor hook checks, at the next backward and before autograd
adds to it, that the gradient is still there and unchanged. When it is not, or when the step is given a closure
(LBFGS, Lightning's automatic optimization: it runs its own forward and backward) or is driven by a
``GradScaler`` (which unscales the gradients at every call), accumulation stops, the optimizer steps every call
again and the knob is refused with the reason: the run is then reported "not applied", never measured.
"""

from __future__ import annotations

import sys
import types
from types import FrameType
from typing import Any, Callable

import torch

from stepwise_agent.inject.report import KnobReport

WITNESSES = 4  # parameters whose gradients are watched between micro-steps
FINGERPRINT = 64  # elements of each witness gradient kept (with the whole tensor's absolute sum)


def _fingerprint(grad: torch.Tensor) -> tuple[torch.Tensor, float]:
    flat = grad.detach().reshape(-1)
    return flat[:FINGERPRINT].clone(), float(flat.abs().sum())


def _from_grad_scaler() -> bool:
    """Whether ``step`` was called by a ``GradScaler`` (torch.amp / torch.cuda.amp)."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            return False
        if "grad_scaler" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


class Accumulation:
    """Accumulation of ``k`` calls on one optimizer (see the module docs)."""

    def __init__(
        self,
        opt: torch.optim.Optimizer,
        k: int,
        knob: KnobReport | None,
        where: str,
        on_skipped_step: Callable[[Any], None] | None = None,
    ) -> None:
        self.opt, self.k, self.knob, self.where = opt, k, knob, where
        self.on_skipped_step = on_skipped_step
        self.calls = 0
        self.real_steps = 0
        self.stopped: str | None = None
        self._plain_step = opt.step
        self._plain_zero = opt.zero_grad
        self._expect: dict[int, tuple[torch.Tensor, float]] = {}
        self._handles: list[Any] = []
        self._witnesses: list[torch.nn.Parameter] = []
        me = self

        def step(opt_: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
            return me.step(*args, **kwargs)

        def zero_grad(opt_: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
            return me.zero_grad(*args, **kwargs)

        opt.step = types.MethodType(step, opt)  # type: ignore[method-assign]
        opt.zero_grad = types.MethodType(zero_grad, opt)  # type: ignore[method-assign]

    # -- the optimizer's two calls ---------------------------------------------------------------------------
    def step(self, *args: Any, **kwargs: Any) -> Any:
        if self.stopped is None:
            closure = kwargs.get("closure", args[0] if args else None)
            if closure is not None:
                self.stop(
                    "the script's optimizer.step() is given a closure that runs its own forward and backward "
                    "(LBFGS, Lightning's automatic optimization): there are no micro-batches to add up"
                )
            elif _from_grad_scaler():
                self.stop(
                    "the script steps through a GradScaler, which unscales the gradients at every call: "
                    "accumulated gradients would mix scaled and unscaled ones"
                )
        if self.stopped is not None:
            return self._plain_step(*args, **kwargs)
        self.calls += 1
        if self.calls % self.k:
            self._remember()
            if self.on_skipped_step is not None:
                self.on_skipped_step(self.opt)  # the script's step call ends one of its steps
            return None
        for group in self.opt.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.div_(self.k)
        self._expect.clear()
        out = self._plain_step(*args, **kwargs)
        self.real_steps += 1
        if self.real_steps == 1 and self.knob is not None:
            self.knob.act(
                f"{self.where}: one real step per {self.k} calls of step(), the {self.k} micro-batches' "
                f"gradients added up and divided by {self.k}"
            )
        return out

    def zero_grad(self, *args: Any, **kwargs: Any) -> Any:
        if (
            self.stopped is not None or self.calls % self.k == 0
        ):  # at a boundary: nothing accumulated yet
            return self._plain_zero(*args, **kwargs)
        return None  # after a skipped step the gradients add up

    # -- watching that nothing else clears the gradients -----------------------------------------------------
    def _remember(self) -> None:
        if not self._witnesses:
            self._watch()
        for p in self._witnesses:
            if p.grad is not None:
                self._expect[id(p)] = _fingerprint(p.grad)

    def _watch(self) -> None:
        for group in self.opt.param_groups:
            for p in group["params"]:
                if len(self._witnesses) >= WITNESSES:
                    return
                if (
                    p.requires_grad
                    and p.grad is not None
                    and float(p.grad.detach().abs().sum()) > 0
                ):
                    self._witnesses.append(p)
                    self._handles.append(p.register_hook(self._checker(p)))

    def _checker(self, p: torch.nn.Parameter) -> Callable[[torch.Tensor], None]:
        def check(grad: torch.Tensor) -> None:
            expected = self._expect.pop(id(p), None)
            if expected is None or self.stopped is not None:
                return
            if p.grad is None:
                self.stop(
                    "the script clears its gradients another way than the optimizer's zero_grad() "
                    "(model.zero_grad() or p.grad = None): the micro-batches' gradients cannot add up"
                )
                return
            head, total = _fingerprint(p.grad)
            if not (torch.equal(head, expected[0]) and total == expected[1]):
                self.stop(
                    "the script zeroes or changes its gradients another way than the optimizer's "
                    "zero_grad() (model.zero_grad(set_to_none=False), p.grad.zero_()): the micro-batches' "
                    "gradients cannot add up"
                )

        return check

    def stop(self, why: str) -> None:
        """Accumulation is not possible here: step every call from now on and say why."""
        self.stopped = why
        if self.knob is not None:
            self.knob.acted = None  # a real step before the refusal does not make it applied
            self.knob.refuse(f"{self.where}: {why}", final=True)
        self.remove_hooks()

    def remove_hooks(self) -> None:
        while self._handles:
            self._handles.pop().remove()
