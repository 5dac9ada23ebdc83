"""Optimizer and DDP knobs, injected as constructor keyword arguments of the script's own objects:
``optimizer_impl`` (``foreach`` / ``fused``) on any ``torch.optim`` optimizer whose constructor has it (each
optimizer built is recorded with its type, first rate and ``fused``, and handed to the convergence knobs:
:mod:`stepwise_agent.inject.convergence`);
``bucket_cap_mb_factor``, ``static_graph`` and ``grad_compression`` (a bf16 comm hook) on its
``DistributedDataParallel``. With fp16 autocast on CUDA, the optimizer's ``step`` goes through the GradScaler.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import torch
from torch.nn.parallel import DistributedDataParallel

from stepwise_agent.capabilities import TorchCapabilities, detect
from stepwise_agent.inject.convergence import ConvergenceInjection
from stepwise_agent.inject.report import InjectionReport
from stepwise_agent.inject.sites import user_site

DDP_DEFAULT_BUCKET_MB = 25.0


def _optimizer_classes() -> list[type]:
    return [
        c
        for c in vars(torch.optim).values()
        if isinstance(c, type)
        and issubclass(c, torch.optim.Optimizer)
        and c is not torch.optim.Optimizer
    ]


class OptimInjection:
    def __init__(
        self,
        knobs: dict[str, Any],
        report: InjectionReport,
        caps: TorchCapabilities | None = None,
        convergence: ConvergenceInjection | None = None,
    ) -> None:
        self.knobs, self.report = knobs, report
        self.convergence = convergence
        self.caps = caps or detect(torch)
        self.optimizers: list[torch.optim.Optimizer] = []
        self._undo: list[Callable[[], None]] = []
        self.scaler: Any = None  # set by the injector when fp16 autocast needs loss scaling
        self.on_skipped_step: Callable[[Any], None] | None = None
        self.acted_on: list[
            str
        ] = []  # the optimizers built with the injected implementation, in order
        self._building: set[int] = set()  # optimizers whose (wrapped) constructor is running

    def install(self) -> None:
        base_init = torch.optim.Optimizer.__init__
        me = self

        def base(opt: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> None:
            base_init(opt, *args, **kwargs)
            me.optimizers.append(opt)
            site = user_site()
            lr = opt.param_groups[0].get("lr") if opt.param_groups else None
            me.report.site(
                "optimizer",
                site,
                type=type(opt).__name__,
                lr=float(lr) if isinstance(lr, (int, float, torch.Tensor)) else None,
                fused=bool(opt.defaults.get("fused")),
                foreach=bool(opt.defaults.get("foreach")),
            )
            if me.convergence is not None:
                me.convergence.on_optimizer(opt, site)

        setattr(
            torch.optim.Optimizer, "__init__", base
        )  # a wrapper of a wider signature, undone below
        self._undo.append(lambda: setattr(torch.optim.Optimizer, "__init__", base_init))
        impl = self.knobs.get("optimizer_impl")
        if impl in ("foreach", "fused"):
            for cls in _optimizer_classes():
                self._wrap_ctor(cls, impl)
        self._wrap_ddp()

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def _wrap_ctor(self, cls: type, impl: str) -> None:
        init = cls.__dict__.get("__init__")
        if init is None:
            return
        refusal = self.caps.optimizer_refusal(cls, impl)
        has = refusal is None

        def wrapped(opt: Any, *args: Any, **kwargs: Any) -> None:
            k = self.report.knob("optimizer_impl")
            if has:
                kwargs[impl] = True
                if impl == "fused":
                    kwargs["foreach"] = None  # fused and foreach are exclusive
            # AdamW's constructor calls Adam's, both wrapped: one optimizer is judged once, by the outermost
            outer = id(opt) not in self._building
            self._building.add(id(opt))
            try:
                init(opt, *args, **kwargs)
            finally:
                if outer:
                    self._building.discard(id(opt))
            if k is None or not outer:
                return
            if not has:
                k.refuse(refusal or f"{cls.__name__} has no {impl} implementation")
            elif opt.defaults.get(impl):
                k.act(f"{type(opt).__name__}({impl}=True): multi-tensor parameter updates")
                self.acted_on.append(type(opt).__name__)

        cls.__init__ = wrapped  # type: ignore[misc]
        self._undo.append(lambda: setattr(cls, "__init__", init))

    def _wrap_ddp(self) -> None:
        init = DistributedDataParallel.__init__
        me = self
        signature = inspect.signature(init)

        def wrapped(ddp: DistributedDataParallel, *args: Any, **kwargs: Any) -> None:
            bound = signature.bind(ddp, *args, **kwargs)
            bound.apply_defaults()
            asked = float(bound.arguments.get("bucket_cap_mb") or DDP_DEFAULT_BUCKET_MB)
            factor = me.knobs.get("bucket_cap_mb_factor")
            if factor is not None:
                bound.arguments["bucket_cap_mb"] = asked * float(factor)
            if me.knobs.get("static_graph"):
                bound.arguments["static_graph"] = True
            me.report.site("ddp", user_site(), bucket_cap_mb=asked)
            init(*bound.args, **bound.kwargs)
            me._ddp_evidence(ddp, asked)

        setattr(
            DistributedDataParallel, "__init__", wrapped
        )  # a wrapper of a wider signature, undone below
        self._undo.append(lambda: setattr(DistributedDataParallel, "__init__", init))

    def _ddp_evidence(self, ddp: DistributedDataParallel, asked: float) -> None:
        r = self.report
        if (k := r.knob("bucket_cap_mb_factor")) is not None:
            k.act(
                f"DDP buckets capped at {ddp.bucket_bytes_cap / 2**20:g} MB (the script asked {asked:g} MB)"
            )
        if (k := r.knob("static_graph")) is not None and getattr(ddp, "static_graph", False):
            k.act("DDP built with static_graph=True")
        if (
            self.knobs.get("grad_compression") == "bf16"
            and (k := r.knob("grad_compression")) is not None
        ):
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            from stepwise_agent.inject.comm import bf16_allreduce_hook

            nccl = torch.distributed.get_backend() == "nccl"
            ddp.register_comm_hook(
                state=None, hook=default_hooks.bf16_compress_hook if nccl else bf16_allreduce_hook
            )
            k.act("gradients all-reduced in bf16 by a DDP comm hook (half the bytes)")

    def finish(self) -> None:
        """Count the optimizers the implementation knob acted on (a GAN has two)."""
        if (k := self.report.knob("optimizer_impl")) is not None and k.acted and self.acted_on:
            k.act(
                f"{len(self.acted_on)} optimizer(s) built with {self.knobs['optimizer_impl']}=True: "
                + ", ".join(self.acted_on)
            )

    # -- GradScaler for fp16 ---------------------------------------------------------------------------------
    def scale_steps(self, scaler: Any) -> None:
        """Route each optimizer's ``step`` through ``scaler`` (unscale, skip on inf/nan, update)."""
        self.scaler = scaler
        for opt in self.optimizers:
            self._scaled_step(opt)

    def _scaled_step(self, opt: torch.optim.Optimizer) -> None:
        plain = opt.step
        state = {"inner": False, "stepped": False}

        def step(*args: Any, **kwargs: Any) -> Any:
            if state["inner"]:  # the scaler calling the optimizer: the real step
                state["stepped"] = True
                return plain(*args, **kwargs)
            state["inner"], state["stepped"] = True, False
            try:
                out = self.scaler.step(opt, *args, **kwargs)
            finally:
                state["inner"] = False
            self.scaler.update()
            if not state["stepped"] and self.on_skipped_step is not None:
                self.on_skipped_step(opt)  # a skipped step (inf gradients) is still a training step
            return out

        opt.step = step  # type: ignore[method-assign]
