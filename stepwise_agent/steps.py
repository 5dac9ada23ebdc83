"""Finding the training steps of a script we did not write, from the outside.

A step ends when the script's optimizer steps (a global ``register_optimizer_step_post_hook``), or — when the
script never created an optimizer (a hand-written SGD update) — when a backward pass ends. Exactly one source
counts each step:

- a script that creates any ``torch.optim.Optimizer`` before its first backward is counted by the optimizer:
  gradient accumulation (several backwards per step) and closures (LBFGS) stay one step each;
- with several optimizers (a GAN's generator and discriminator), only the first that steps counts;
- a script without optimizer is counted by its outermost backward calls (``Tensor.backward`` calls
  ``torch.autograd.backward``: the nested call is not a second step);
- if an optimizer first steps after backward counting began, counting moves to it from the next step on; if
  one exists but has not stepped after ``BACKWARD_FALLBACK`` backwards, backward counting takes over.

A step's loss is the sum of the losses backpropagated since the last step: the loss whose gradient the optimizer
steps on. With one backward per step that is the backward's loss; under gradient accumulation each micro-batch's
loss is divided by the accumulation (a Hugging Face ``Trainer`` divides by ``gradient_accumulation_steps``, or
normalises by the window's items; Lightning by ``accumulate_grad_batches``; nanoGPT by its own), so the sum is the
whole batch's loss, where the last micro-batch's alone was 1/k of it (an accumulation arm read as "at the target
from step 0"). A loss backpropagated through a ``GradScaler`` (``scaler.scale(loss).backward()``, fp16 on CUDA) is
divided by the scaler's scale again: it was 65536 times the loss.

Batches drawn from any ``DataLoader`` are sized (first tensor's leading dimension) so samples/s can be known, and
the time spent drawing them is summed per step (``last_data_ms``: fetch, decode, collate — the time a data fix
can remove, measured without the profiler). The time inside the step's outermost backward calls is summed too
(``last_backward_ms``): under DDP the gradients' all-reduce runs inside backward, so a rank that is done first
waits there for the slowest; the step's wall minus it is the rank's own work, which shows a rank falling behind
(:mod:`profilers.run.rank_watch`) where every rank's step wall is the same.
"""

from __future__ import annotations

import time
import weakref
from typing import Any, Callable

import torch
from torch.utils.data import dataloader

from stepwise_agent.patching import Patches

try:  # torch >= 2.0; without it steps are counted at backward calls (see the module docs)
    from torch.optim.optimizer import register_optimizer_step_post_hook
except ImportError:  # pragma: no cover - only an older torch than this machine's lacks it
    register_optimizer_step_post_hook = None  # type: ignore[assignment]

BACKWARD_FALLBACK = 64

OnStep = Callable[[float | None, int | None], None]  # (loss, samples drawn since the last step)


def _scalar(value: Any) -> float | None:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        try:
            return float(value.detach().float().item())
        except RuntimeError:
            return None
    return None


def _batch_size(batch: Any) -> int | None:
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() > 0 else None
    if isinstance(batch, (list, tuple)):
        items: list[Any] = list(batch)
    elif isinstance(batch, dict):
        items = list(batch.values())
    else:
        return None
    for item in items:
        size = _batch_size(item)
        if size is not None:
            return size
    return None


class StepDetector(Patches):
    """Installs process-wide hooks and calls ``on_step(loss, samples)`` once per detected step."""

    def __init__(self, on_step: OnStep) -> None:
        self._on_step = on_step
        self.mode: str | None = None  # "optimizer" | "backward", decided by what the script does
        self._optimizer_created = False
        self._lead: int | None = None
        self._depth = 0
        self._backwards_since_step = 0
        self._last_loss: float | None = (
            None  # the sum of the losses backpropagated since the last step
        )
        self._samples: int | None = None
        self._data_ns: int | None = (
            None  # time inside DataLoader.__next__ since the last step (fetch, decode, collate)
        )
        self.last_data_ms: float | None = (
            None  # that time for the step just emitted; None: no batch was drawn
        )
        self._backward_ns: int | None = (
            None  # time inside outermost backward calls since the last step
        )
        self.last_backward_ms: float | None = (
            None  # that time for the step just emitted; None: no backward
        )
        super().__init__()
        self._scaled: tuple[weakref.ref[torch.Tensor], torch.Tensor] | None = (
            None  # GradScaler.scale's last output
        )
        self.before_step: Callable[[], None] | None = (
            None  # called first at each detected step (the injector)
        )
        self._stepped = 0  # optimizer steps of the lead optimizer seen by the post-hook
        self._skip_counted: Any = (
            None  # the optimizer whose skipped step the GradScaler wrapper has just counted
        )

    def count_step(self, optimizer: Any) -> None:
        """A step that the optimizer skipped on purpose (a GradScaler seeing inf gradients) still ends a step."""
        if self._skip_counted is optimizer:  # the GradScaler wrapper already counted this very skip
            self._skip_counted = None
            return
        self._after_optimizer_step(optimizer, (), {})

    def install(self) -> None:
        if register_optimizer_step_post_hook is not None:
            handle = register_optimizer_step_post_hook(self._after_optimizer_step)
            self._undo.append(handle.remove)
            self._patch(torch.optim.Optimizer, "__init__", self._wrap_optimizer_init)
        self._patch(torch.Tensor, "backward", self._wrap_backward)
        self._patch(torch.autograd, "backward", self._wrap_backward)
        self._patch(dataloader._BaseDataLoaderIter, "__next__", self._wrap_next)
        scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
        if scaler is not None and hasattr(scaler, "scale"):
            self._patch(scaler, "scale", self._wrap_scale)
        if (
            scaler is not None
            and hasattr(scaler, "step")
            and register_optimizer_step_post_hook is not None
        ):
            self._patch(scaler, "step", self._wrap_scaler_step)

    # -- the hooks ---------------------------------------------------------------------------------------------
    def _wrap_optimizer_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def init(opt: Any, *args: Any, **kwargs: Any) -> None:
            self._optimizer_created = True
            original(opt, *args, **kwargs)

        return init

    def _wrap_backward(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def backward(*args: Any, **kwargs: Any) -> Any:
            self._depth += 1
            started = time.perf_counter_ns() if self._depth == 1 else 0
            try:
                out = original(*args, **kwargs)
            finally:
                self._depth -= 1
            if self._depth == 0:
                self._backward_ns = (self._backward_ns or 0) + time.perf_counter_ns() - started
                self._after_backward(args[0] if args else kwargs.get("tensors"))
            return out

        return backward

    def _wrap_next(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def next_batch(it: Any) -> Any:
            started = time.perf_counter_ns()
            batch = original(it)
            self._data_ns = (self._data_ns or 0) + time.perf_counter_ns() - started
            size = _batch_size(batch)
            if size is not None:
                self._samples = (self._samples or 0) + size
            return batch

        return next_batch

    def _wrap_scale(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def scale(scaler: Any, outputs: Any) -> Any:
            out = original(scaler, outputs)
            factor = getattr(scaler, "_scale", None)
            if (
                isinstance(out, torch.Tensor)
                and isinstance(factor, torch.Tensor)
                and out is not outputs
            ):
                self._scaled = (
                    weakref.ref(out),
                    factor,
                )  # read at the backward, before update() changes it
            return out

        return scale

    def _wrap_scaler_step(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            before = self._stepped
            out = original(scaler, optimizer, *args, **kwargs)
            lead = self._lead is None or self._lead == id(optimizer)
            if self._stepped == before and lead and self.mode != "backward":
                self._after_optimizer_step(
                    optimizer, (), {}
                )  # skipped for inf gradients: still one step
                self._skip_counted = optimizer
            return out

        return step

    def _after_backward(self, tensors: Any) -> None:
        self._skip_counted = None
        tensor = (
            tensors
            if isinstance(tensors, torch.Tensor)
            else (tensors[0] if isinstance(tensors, (list, tuple)) and len(tensors) == 1 else None)
        )
        loss = _scalar(tensor)
        if loss is not None and self._scaled is not None and self._scaled[0]() is tensor:
            factor = _scalar(self._scaled[1])
            loss = loss / factor if factor else loss
            self._scaled = None
        if loss is not None:
            self._last_loss = loss if self._last_loss is None else self._last_loss + loss
        self._backwards_since_step += 1
        if self.mode is None and (
            not self._optimizer_created or self._backwards_since_step > BACKWARD_FALLBACK
        ):
            self.mode = "backward"
        if self.mode == "backward":
            self._emit()

    def _after_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._lead is None:
            self._lead = id(optimizer)
        if id(optimizer) != self._lead:
            return
        self._stepped += 1
        if self.mode == "backward":
            self.mode = "optimizer"  # this step was already counted by its backward
            self._backwards_since_step = 0
            return
        self.mode = "optimizer"
        self._emit()

    def _emit(self) -> None:
        loss, samples = self._last_loss, self._samples
        self.last_data_ms = None if self._data_ns is None else self._data_ns / 1e6
        self.last_backward_ms = None if self._backward_ns is None else self._backward_ns / 1e6
        self._last_loss, self._samples, self._backwards_since_step, self._data_ns = (
            None,
            None,
            0,
            None,
        )
        self._backward_ns = None
        if self.before_step is not None:
            self.before_step()
        self._on_step(loss, samples)
