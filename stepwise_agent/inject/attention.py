"""``sdpa_attention``: a module whose forward is attention written by hand gets a forward that calls
``torch.nn.functional.scaled_dot_product_attention``, after it is shown to compute the same.

While the first steps run, a global forward pre-hook looks at each module of the user's code the
first time it is called. Its class's ``forward`` source is read
(:mod:`stepwise_agent.attention_source`: a softmax between two matmuls, an optional mask and
dropout). Only the layout of minGPT and nanoGPT is re-implemented: a ``c_attn`` Linear (q, k, v
side by side) or ``query``/``key``/``value`` Linears, an ``n_head`` count, a ``c_proj``/``proj``
output Linear and optional attention and residual dropouts, with ``forward(self, x)`` on a
``(B, T, C)`` tensor. Anything else is refused with its reason: its forward stays the user's.

The check runs on the module's own input of that first call, inside the call (the script's
autocast still on), with grad on and dropout off: the old and the new forward's outputs and input
gradients (for one random output gradient from a generator of its own, so the script's random
stream is left as it was) are compared. Parameter gradients are never touched
(``torch.autograd.grad`` on the input only). Within :data:`TOLERANCE` of the reference's largest
magnitude the new forward replaces the instance's; otherwise the module keeps its own and the knob
says ``the replacement changes the outputs (max |Δ| …)``. Dropout in training is SDPA's
``dropout_p`` (the module's attention dropout's ``p``), which the check cannot compare.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn
from torch.nn import functional as F

from stepwise_agent.attention_source import HandAttention, recognise
from stepwise_agent.inject.report import InjectionReport
from stepwise_agent.inject.sites import is_user_file

#: allowed max |Δ| of outputs and input gradients, × max(1, the reference's largest magnitude)
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-8, torch.bfloat16: 3e-2, torch.float16: 5e-3}
NONE_FOUND = "no module of the script computes a softmax between two matmuls in its forward"
_ATTN_DROP = ("attn_dropout", "attn_drop")
_RESID_DROP = ("resid_dropout", "resid_drop")


@dataclass(frozen=True)
class Layout:
    """Where q, k and v come from (``fused``: one ``c_attn``), the output projection's name and
    the dropouts by name (``None``: none)."""

    fused: bool
    proj: str
    attn_drop: str | None
    resid_drop: str | None


@dataclass(frozen=True)
class Recorded:
    """One module looked at: where its softmax is, and what became of it; ``causal`` and
    ``dropout`` (its attention dropout's attribute) are what the replacement calls SDPA with."""

    name: str
    where: str
    applied: bool
    max_diff: float | None
    said: str
    causal: bool | None = None
    dropout: str | None = None


def layout_of(module: nn.Module) -> tuple[Layout | None, str]:
    """The recognised layout of ``module``, or ``None`` and why it is not one."""
    kids = dict(module.named_children())
    fused = isinstance(kids.get("c_attn"), nn.Linear)
    split = all(isinstance(kids.get(n), nn.Linear) for n in ("query", "key", "value"))
    proj = next((n for n in ("c_proj", "proj") if isinstance(kids.get(n), nn.Linear)), None)
    if not (fused or split) or proj is None:
        return None, (
            "its layout is not minGPT/nanoGPT's (c_attn or query/key/value Linears and a "
            "c_proj/proj output Linear)"
        )
    if not isinstance(getattr(module, "n_head", None), int):
        return None, "it has no integer n_head"
    drops = {n for n, m in kids.items() if isinstance(m, nn.Dropout)}
    attn = next((n for n in _ATTN_DROP if n in drops), None)
    resid = next((n for n in _RESID_DROP if n in drops), None)
    known = ({"c_attn"} if fused else {"query", "key", "value"}) | {proj} | {attn, resid}
    other = sorted(set(kids) - known)
    if other:
        return None, f"it has submodules the replacement does not know: {', '.join(other)}"
    params = [p for p in inspect.signature(type(module).forward).parameters.values()][1:]
    if len(params) != 1 or params[0].kind not in (
        params[0].POSITIONAL_ONLY,
        params[0].POSITIONAL_OR_KEYWORD,
    ):
        return None, "its forward takes more than one input"
    return Layout(fused, proj, attn, resid), "minGPT/nanoGPT layout"


def sdpa_forward(module: nn.Module, layout: Layout, shape: HandAttention) -> Callable[..., Any]:
    """The module's forward with ``scaled_dot_product_attention`` in place of the hand-written one
    (scale: SDPA's default ``1/√head_dim``, which the check confirms is the module's)."""
    attn_drop = getattr(module, layout.attn_drop) if layout.attn_drop else None
    resid_drop = getattr(module, layout.resid_drop) if layout.resid_drop else None
    proj = getattr(module, layout.proj)
    heads = int(getattr(module, "n_head"))
    qkv = [getattr(module, n) for n in (("c_attn",) if layout.fused else ("query", "key", "value"))]

    def forward(x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = qkv[0](x).split(C, dim=2) if layout.fused else (m(x) for m in qkv)
        q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
        p = float(attn_drop.p) if attn_drop is not None and module.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=shape.causal)
        y = proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return resid_drop(y) if resid_drop is not None else y

    return forward


def max_difference(
    old: Callable[..., Any], new: Callable[..., Any], x: torch.Tensor, module: nn.Module
) -> tuple[float, float]:
    """(max |Δ| of outputs and input gradients, the tolerance it is held to) of ``new`` against
    ``old`` on input ``x``, dropout off (the module's mode restored after)."""
    training = module.training
    module.train(False)
    try:
        outs, grads = [], []
        gen = torch.Generator(device=x.device).manual_seed(0)
        for fn in (old, new):
            with torch.enable_grad():
                xi = x.detach().clone().requires_grad_(x.is_floating_point())
                y = fn(xi)
            outs.append(y.detach())
            if xi.requires_grad and y.requires_grad:
                gen.manual_seed(0)
                g = torch.randn(y.shape, generator=gen, device=y.device, dtype=y.dtype)
                with torch.enable_grad():
                    grads.append(torch.autograd.grad(y, xi, g)[0].detach())
    finally:
        module.train(training)
    if outs[0].shape != outs[1].shape:
        return float("inf"), 0.0
    pairs = [(outs[0], outs[1])] + ([(grads[0], grads[1])] if len(grads) == 2 else [])
    diff = max(float((a.float() - b.float()).abs().max()) for a, b in pairs)
    scale = max(1.0, *(float(a.float().abs().max()) for a, _ in pairs))
    return diff, TOLERANCE.get(outs[0].dtype, 1e-4) * scale


class AttentionInjection:
    """The ``sdpa_attention`` knob (see the module docs). ``names``: the qualified name of a
    module, from the models the script trains (given by the caller)."""

    def __init__(
        self, knobs: dict[str, Any], report: InjectionReport, names: Callable[[nn.Module], str]
    ) -> None:
        self.on = bool(knobs.get("sdpa_attention"))
        self.report, self.names = report, names
        self.records: list[Recorded] = []
        self._classes: dict[type, tuple[HandAttention | None, str, str]] = {}
        self._looked: set[int] = set()
        self._handle: Any = None

    def install(self) -> None:
        if self.on:
            from torch.nn.modules import module as nn_module

            self._handle = nn_module.register_module_forward_pre_hook(self._pre)

    def stop_watching(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    uninstall = stop_watching

    def _source(self, cls: type) -> tuple[HandAttention | None, str, str]:
        """The class's hand-written attention (``None``: none), why, and its ``file:line``."""
        if cls not in self._classes:
            code = getattr(getattr(cls, "forward", None), "__code__", None)
            if code is None or not is_user_file(code.co_filename):
                self._classes[cls] = (None, "not the user's code", "")
            else:
                try:
                    source = inspect.getsource(cls.forward)  # type: ignore[attr-defined]
                    shape, why = recognise(source)
                except (OSError, TypeError):
                    shape, why = None, "its forward's source cannot be read"
                line = code.co_firstlineno + (shape.line - 1 if shape else 0)
                self._classes[cls] = (shape, why, f"{code.co_filename}:{line}")
        return self._classes[cls]

    def _pre(self, module: nn.Module, args: Any) -> None:
        if id(module) in self._looked:
            return
        self._looked.add(id(module))
        shape, _, where = self._source(type(module))
        if shape is None:
            return
        name = self.names(module) or type(module).__name__
        layout, why = layout_of(module)
        x = args[0] if len(args) == 1 else None
        if layout is not None and (not isinstance(x, torch.Tensor) or x.dim() != 3):
            layout, why = None, "it was not called with one (batch, time, channels) tensor"
        if layout is None or not isinstance(x, torch.Tensor):
            self._record(Recorded(name, where, False, None, f"{name} ({where}): {why}"))
            return
        original, new = module.forward, sdpa_forward(module, layout, shape)
        try:
            diff, tol = max_difference(original, new, x, module)
        except (RuntimeError, AttributeError, TypeError, ValueError) as err:  # it does not fit
            self._record(
                Recorded(
                    name,
                    where,
                    False,
                    None,
                    f"{name} ({where}): the replacement fails on its input: {err}",
                )
            )
            return
        if diff <= tol:
            from stepwise_agent.inject.modules import set_forward

            set_forward(module, new)
            drop = getattr(module, layout.attn_drop).p if layout.attn_drop else 0.0
            said = (
                f"{name} ({where}): {shape.describe()} replaced by scaled_dot_product_attention"
                f"(is_causal={shape.causal}, dropout_p={drop:g} in training); outputs and "
                f"input gradients on its first call agree to max |Δ| {diff:.2e} "
                f"(tolerance {tol:.0e}, {x.dtype})"
            )
        else:
            said = (
                f"the replacement changes the outputs (max |Δ| {diff:.2e} > tolerance "
                f"{tol:.0e}) of {name} ({where})"
            )
        self._record(Recorded(name, where, diff <= tol, diff, said, shape.causal, layout.attn_drop))

    def _record(self, r: Recorded) -> None:
        self.records.append(r)
        file, _, line = r.where.rpartition(":")
        if file:
            self.report.site(
                "attention",
                {"file": file, "line": int(line)},
                module=r.name,
                applied=r.applied,
                max_abs_diff=r.max_diff,
                causal=r.causal,
                dropout=r.dropout,
            )
        k = self.report.knob("sdpa_attention")
        if k is not None and r.applied:
            k.act(r.said)
        elif k is not None:
            k.refuse(r.said)

    def finish(self) -> None:
        k = self.report.knob("sdpa_attention")
        if k is not None and not self.records:
            k.refuse(NONE_FOUND)
