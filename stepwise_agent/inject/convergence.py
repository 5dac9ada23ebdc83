"""Convergence knobs for ``optimize --to-quality``, injected into the script's own objects. Stepwise picks the
numbers (the rule each follows is chosen from the baseline run: ``advisors.quality.script_candidates``); the
agent only applies them and reports where:

- ``batch_scale`` k: every ``DataLoader(batch_size=B)`` the user's own code builds gets ``batch_size=B×k``
  (through the loader injection's hook, :mod:`stepwise_agent.inject.loader`). A loader a library builds (a
  Hugging Face ``Trainer``'s, accelerate's) is not scaled a second time: the framework's own field is
  (``per_device_train_batch_size``). It acted when the training loader (the first that yields) has the scaled size.
- ``lr_scale`` s: every ``torch.optim`` optimizer, once built, has each param group's ``lr`` (and ``initial_lr``
  when present, and ``defaults["lr"]`` for groups added later) multiplied by s. An LR scheduler built afterwards
  takes the scaled rates as its base rates, so its schedule is kept, scaled.
- ``warmup_steps`` W (with ``lr_scale`` s > 1): Goyal et al.'s gradual warm-up, from the script's rate to the
  scaled one, linear over the first W optimizer steps. During step n the group's rate is multiplied by
  ``(1 + (s − 1)·min(1, n/W)) / s`` and put back right after the step (optimizer step pre/post hooks): between
  steps the group holds whatever the script's scheduler set, so a scheduler keeps working and is ramped too.
- ``grad_accum`` k: :class:`stepwise_agent.inject.accumulate.Accumulation` on every optimizer ("where the
  script allows": refused with the reason otherwise).
- ``optimizer_swap`` ``"adamw"``: ``torch.optim.SGD(params, …)`` builds an ``AdamW(params, lr=1e-3)``
  instead (PyTorch's default rate and weight decay; per-group rates keep their ratio to the SGD rate; SGD's
  momentum/dampening/nesterov are dropped). (A fused Adam/AdamW is the ``optimizer_impl`` knob of
  :mod:`stepwise_agent.inject.optim`.)

Frameworks (:mod:`stepwise_agent.inject.frameworks`) take these at their own switch: ``TrainingArguments``'
``per_device_train_batch_size``, ``learning_rate``, ``warmup_steps``, ``gradient_accumulation_steps``;
``L.Trainer(accumulate_grad_batches=…)``. A knob a framework took is ``owned``: the generic hooks stand aside.

Where the script has its own flag or config line for the change (``--per_device_train_batch_size 32``,
``--batch-size 64 --lr 0.002``; ``advisors.experiments.quality_knobs``), the arm is the user's command with it
changed and nothing is injected: the run is given the values the command now asks for as *observed* knobs
(:data:`COMMAND_KNOBS`), which the agent only checks — ``batch_size``: the training loader yields batches of it;
``lr``: the first optimizer built has that rate; ``accumulation_steps``: ``TrainingArguments`` or ``L.Trainer``
holds that many; ``warmup_steps`` (observed): ``TrainingArguments`` holds it. Given to be injected, they are
refused: they only check a command.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import torch

from stepwise_agent.inject.accumulate import Accumulation
from stepwise_agent.inject.report import InjectionReport
from stepwise_agent.inject.sites import called_by_user, user_site

#: observe-only: the values the user's changed command asks for, checked, never set
COMMAND_KNOBS = ("batch_size", "lr", "accumulation_steps")
CONVERGENCE_KNOBS = (
    "batch_scale",
    "lr_scale",
    "warmup_steps",
    "grad_accum",
    "optimizer_swap",
    *COMMAND_KNOBS,
)
ADAMW_LR = 1e-3
SGD_ONLY = ("momentum", "dampening", "nesterov")


def where(site: dict[str, Any] | None) -> str:
    if site is None:
        return "outside your code"
    return f"{os.path.basename(site['file'])}:{site['line']}"


class _WatchedGroup(dict):
    """A param group that notes the first write of its ``lr`` from the user's own code (a library's scheduler
    writes from its own files and is not counted)."""

    def __init__(self, group: dict[str, Any], seen: dict[str, Any]) -> None:
        super().__init__(group)
        self._seen = seen

    def __setitem__(self, key: str, value: Any) -> None:
        if key == "lr" and not self._seen:
            site = user_site(2)
            if site is not None and called_by_user(2):
                self._seen.update(site)
        super().__setitem__(key, value)


def _times(value: Any, factor: float) -> Any:
    return (
        value * factor
    )  # a tensor rate becomes a new tensor on its device; the script's own is untouched


def _rate(value: Any) -> str:
    return f"{float(value):g}"


class ConvergenceInjection:
    def __init__(
        self,
        knobs: dict[str, Any],
        report: InjectionReport,
        on_skipped_step: Callable[[Any], None] | None = None,
    ) -> None:
        self.knobs = {k: v for k, v in knobs.items() if k in CONVERGENCE_KNOBS}
        self.report = report
        self.on_skipped_step = on_skipped_step
        self.owned: set[str] = set()  # knobs a framework's own field took
        self.expected_batch: int | None = (
            None  # the framework's scaled batch, when it owns batch_scale
        )
        self.observe: set[str] = (
            set()
        )  # knobs the user's changed command sets: checked, never applied
        self.rate_checked = False
        self.scaled: list[dict[str, Any]] = []  # DataLoaders whose batch size was scaled
        self.accumulations: list[Accumulation] = []
        self._undo: list[Callable[[], None]] = []

    def install(self) -> None:
        for knob in COMMAND_KNOBS:
            if knob in self.knobs and knob not in self.observe:
                self._refuse(
                    knob,
                    f"{knob} is what a changed command asks for: it is checked, never injected",
                    final=True,
                )
        self.owned |= self.observe & set(
            CONVERGENCE_KNOBS
        )  # the command sets them: the generic hooks stand aside
        if (
            "warmup_steps" not in self.observe
            and self.knobs.get("warmup_steps")
            and float(self.knobs.get("lr_scale") or 1) <= 1
        ):
            self._refuse(
                "warmup_steps",
                "nothing to warm up to: the learning rate is not scaled up",
                final=True,
            )
        swap = self.knobs.get("optimizer_swap")
        if swap == "adamw":
            self._swap_sgd()
        elif swap is not None:
            self._refuse(
                "optimizer_swap", f"no swap named {swap!r}: only 'adamw' (SGD → AdamW)", final=True
            )

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()
        for acc in self.accumulations:
            acc.remove_hooks()

    def _refuse(self, knob: str, why: str, final: bool = False) -> None:
        if (k := self.report.knob(knob)) is not None:
            k.refuse(why, final)

    def _act(self, knob: str, evidence: str) -> None:
        if (k := self.report.knob(knob)) is not None:
            k.act(evidence)

    def _generic(self, knob: str) -> Any:
        """The knob's value when the generic hooks apply it (not taken by a framework), else None."""
        return None if knob in self.owned else self.knobs.get(knob)

    # -- the batch (called by the loader injection) ----------------------------------------------------------
    def scale_batch(self, args: dict[str, Any], site: dict[str, Any] | None) -> None:
        k = self._generic("batch_scale")
        size = args.get("batch_size")
        if not k or site is None or "via" in site or args.get("batch_sampler") is not None:
            return  # a library's loader follows the framework's own field; a batch sampler sets its own size
        if isinstance(size, int) and not isinstance(size, bool):
            args["batch_size"] = size * int(k)
            self.scaled.append({"site": site, "asked": size, "batch_size": size * int(k)})

    def training_loader(self, batch_size: int | None, site: dict[str, Any] | None) -> None:
        """The first loader that yields trains: it acted when its batches are the scaled size (or, observed, the
        size the command asks for)."""
        if "batch_size" in self.observe:
            want = self.knobs.get("batch_size")
            if batch_size == want:
                self._act(
                    "batch_size",
                    f"the training DataLoader (built {where(site)}) yields batches of "
                    f"{batch_size}, the size your command asks for",
                )
            else:
                self._refuse(
                    "batch_size",
                    f"the training DataLoader (built {where(site)}) yields batches of "
                    f"{batch_size}, not the {want} the changed command asks for: the flag "
                    "does not reach this loader",
                )
        if "batch_scale" not in self.knobs:
            return
        hits = [s for s in self.scaled if s["batch_size"] == batch_size]
        if hits:
            s = hits[0]
            self._act(
                "batch_scale",
                f"DataLoader(batch_size={s['batch_size']}) at {where(s['site'])} (the script "
                f"asked {s['asked']}): the training loader yields batches of {batch_size}",
            )
        elif "batch_scale" in self.owned and batch_size == self.expected_batch:
            self._act(
                "batch_scale", f"the framework's training loader yields batches of {batch_size}"
            )
        elif self.scaled:
            self._refuse(
                "batch_scale",
                f"the training DataLoader (built {where(site)}) yields batches of "
                f"{batch_size}, not the scaled size: a library rebuilt it from its own "
                "settings; change the batch size where you configure that library",
            )
        else:
            self._refuse(
                "batch_scale",
                f"the training DataLoader at {where(site)} has no integer batch_size of "
                "your code's to scale (a batch_sampler, an IterableDataset that yields "
                "batches, or a library built it): change the batch size where it is set",
            )

    # -- the optimizer (called by the optimizer injection once one is built) ---------------------------------
    def on_optimizer(self, opt: torch.optim.Optimizer, site: dict[str, Any] | None) -> None:
        name, at = type(opt).__name__, where(site)
        if "lr" in self.observe and not self.rate_checked:  # the first optimizer built trains
            self.rate_checked = True
            held, want = (
                opt.param_groups[0].get("lr") if opt.param_groups else None,
                self.knobs.get("lr"),
            )
            if (
                isinstance(held, (int, float, torch.Tensor))
                and isinstance(want, (int, float))
                and abs(float(held) - float(want)) <= 1e-9 + 1e-6 * abs(float(want))
            ):
                self._act(
                    "lr",
                    f"{name} at {at} built with lr {_rate(held)}, the rate your command asks for",
                )
            else:
                self._refuse(
                    "lr",
                    f"{name} at {at} built with lr {held}, not the {want} the changed command asks "
                    "for: the flag does not reach this optimizer",
                )
        scale = self._generic("lr_scale")
        if scale is not None and float(scale) != 1:
            self._scale_lr(opt, float(scale), f"{name} at {at}")
        steps = self._generic("warmup_steps")
        if steps and scale is not None and float(scale) > 1:
            self._warm_up(opt, float(scale), int(steps), f"{name} at {at}")
        k = self._generic("grad_accum")
        if k and int(k) > 1:
            self.accumulations.append(
                Accumulation(
                    opt,
                    int(k),
                    self.report.knob("grad_accum"),
                    f"{name} at {at}",
                    self.on_skipped_step,
                )
            )

    def _scale_lr(self, opt: torch.optim.Optimizer, scale: float, what: str) -> None:
        before = [g["lr"] for g in opt.param_groups]
        for group in opt.param_groups:
            group["lr"] = _times(group["lr"], scale)
            if "initial_lr" in group:
                group["initial_lr"] = _times(group["initial_lr"], scale)
        if "lr" in opt.defaults:
            opt.defaults["lr"] = _times(opt.defaults["lr"], scale)
        groups = f" ({len(before)} param groups)" if len(before) > 1 else ""
        self._act(
            "lr_scale",
            f"{what}: lr {_rate(before[0])} → {_rate(opt.param_groups[0]['lr'])}{groups}, "
            f"× {scale:g}; a scheduler built afterwards starts from the scaled rate",
        )
        self._check_rate_holds(opt, what)

    def _check_rate_holds(self, opt: torch.optim.Optimizer, what: str) -> None:
        """A scaled rate must hold through the steps, not only be set once: a script that writes
        ``param_group["lr"]`` itself every step (its own schedule: llm.c, nanoGPT) replaces it with its unscaled
        rate. Its groups are watched for such writes from the user's own code; one seen by the end of the first
        step refuses the knob, naming the line (its own flag is where the rate changes)."""
        seen: dict[str, Any] = {}
        checked: list[bool] = []
        opt.param_groups[:] = [_WatchedGroup(g, seen) for g in opt.param_groups]
        me = self

        def post(o: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
            if (
                checked
            ):  # once, after the first step (a hook is not removed while torch runs the hooks)
                return
            checked.append(True)
            k = me.report.knob("lr_scale")
            if seen and k is not None:
                k.acted = None  # set once is not applied: the rate did not hold
                k.refuse(
                    f"{what}: the script sets param_group['lr'] itself at {where(seen)} every step, replacing "
                    "the scaled rate (change the rate where the script sets it: its own flag)",
                    final=True,
                )

        handle = opt.register_step_post_hook(post)
        self._undo.append(handle.remove)

    def _warm_up(self, opt: torch.optim.Optimizer, scale: float, steps: int, what: str) -> None:
        state: dict[str, Any] = {"n": 0, "saved": None}
        me = self

        def pre(o: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
            factor = (1 + (scale - 1) * min(1.0, state["n"] / steps)) / scale
            if factor < 1:
                state["saved"] = [g["lr"] for g in o.param_groups]
                for g in o.param_groups:
                    g["lr"] = _times(g["lr"], factor)

        def post(o: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
            saved, state["saved"] = state["saved"], None
            if saved is not None:
                for g, lr in zip(o.param_groups, saved):
                    g["lr"] = lr
            state["n"] += 1
            if state["n"] == 1:
                me._act(
                    "warmup_steps",
                    f"{what}: linear warm-up over the first {steps} steps, from the script's "
                    f"rate (× 1/{scale:g} of the scaled one) to the scaled rate",
                )

        handles = [opt.register_step_pre_hook(pre), opt.register_step_post_hook(post)]
        self._undo.extend(h.remove for h in handles)

    # -- SGD → AdamW -----------------------------------------------------------------------------------------
    def _swap_sgd(self) -> None:
        """``SGD.__init__`` turns the new object into an AdamW (``__class__`` changed, then ``AdamW.__init__``):
        the script's variable holds a real AdamW. (Patching ``__new__`` instead cannot be undone cleanly.)"""
        sgd = torch.optim.SGD
        original = sgd.__dict__["__init__"]
        me = self

        def init(opt: Any, *args: Any, **kwargs: Any) -> None:
            if type(opt) is not sgd:  # a subclass of the user's own keeps its SGD
                return original(opt, *args, **kwargs)
            me._become_adamw(opt, args, kwargs)

        setattr(sgd, "__init__", init)  # a wrapper of a wider signature, undone below
        self._undo.append(lambda: setattr(sgd, "__init__", original))

    def _become_adamw(self, opt: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        site = user_site()
        params = list(args[0] if args else kwargs["params"])
        sgd_lr = float(kwargs.get("lr", args[1] if len(args) > 1 else 1e-3))
        if params and isinstance(params[0], dict):
            params = [self._adamw_group(g, sgd_lr) for g in params]
        opt.__class__ = torch.optim.AdamW
        torch.optim.AdamW.__init__(opt, params, lr=ADAMW_LR)
        self._act(
            "optimizer_swap",
            f"SGD(lr={sgd_lr:g}) at {where(site)} built as AdamW(lr={ADAMW_LR:g}, "
            f"weight_decay={opt.defaults['weight_decay']:g})",
        )

    @staticmethod
    def _adamw_group(group: dict[str, Any], sgd_lr: float) -> dict[str, Any]:
        out = {k: v for k, v in group.items() if k not in SGD_ONLY}
        if "lr" in out:
            out["lr"] = ADAMW_LR * float(out["lr"]) / sgd_lr if sgd_lr else ADAMW_LR
        if out.get(
            "weight_decay"
        ):  # SGD's L2 coefficient is no decoupled decay: AdamW's default (a 0 is kept)
            del out["weight_decay"]
        return out

    # -- frameworks' own fields ------------------------------------------------------------------------------
    def training_arguments(self, args: Any, at: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """Set the knobs on a ``TrainingArguments`` before its validation: ``(fields set, their old values)``."""
        set_: dict[str, Any] = {}
        asked: dict[str, Any] = {}

        def put(field: str, value: Any) -> None:
            asked[field] = getattr(args, field, None)
            setattr(args, field, value)
            set_[field] = value

        self._held_by(
            "TrainingArguments",
            at,
            {
                "accumulation_steps": getattr(args, "gradient_accumulation_steps", None),
                "warmup_steps": getattr(args, "warmup_steps", None),
            },
        )
        if (k := self._generic("batch_scale")) and isinstance(
            getattr(args, "per_device_train_batch_size", None), int
        ):
            put("per_device_train_batch_size", args.per_device_train_batch_size * int(k))
            self.expected_batch = set_["per_device_train_batch_size"]
        if (s := self._generic("lr_scale")) and isinstance(
            getattr(args, "learning_rate", None), (int, float)
        ):
            put("learning_rate", float(args.learning_rate) * float(s))
        if (w := self._generic("warmup_steps")) and float(self.knobs.get("lr_scale") or 1) > 1:
            if not (getattr(args, "warmup_steps", 0) or getattr(args, "warmup_ratio", 0)):
                put("warmup_steps", int(w))
            else:
                self.owned.add("warmup_steps")
                self._act(
                    "warmup_steps",
                    f"TrainingArguments at {at} already warm up (warmup_steps="
                    f"{getattr(args, 'warmup_steps', 0)}, warmup_ratio="
                    f"{getattr(args, 'warmup_ratio', 0)}): kept",
                )
        if (k := self._generic("grad_accum")) and isinstance(
            getattr(args, "gradient_accumulation_steps", None), int
        ):
            put("gradient_accumulation_steps", args.gradient_accumulation_steps * int(k))
        fields = {
            "per_device_train_batch_size": "batch_scale",
            "learning_rate": "lr_scale",
            "warmup_steps": "warmup_steps",
            "gradient_accumulation_steps": "grad_accum",
        }
        for field, value in set_.items():
            knob = fields[field]
            self.owned.add(knob)
            evidence = f"TrainingArguments({field}={value!r}) set at {at} (the script asked {asked[field]!r})"
            if knob == "batch_scale":  # acted once its loader is seen with that size
                if (r := self.report.knob(knob)) is not None:
                    r.evidence.append(evidence)
            else:
                self._act(knob, evidence + "; the Trainer applies it itself")
        return set_, asked

    def lightning_trainer(self, kwargs: dict[str, Any], at: str) -> dict[str, Any]:
        """``L.Trainer(accumulate_grad_batches=…)`` for ``grad_accum`` (Lightning steps with a closure, which the
        generic accumulation cannot gather)."""
        self._held_by(
            "L.Trainer", at, {"accumulation_steps": kwargs.get("accumulate_grad_batches", 1)}
        )
        k = self._generic("grad_accum")
        if not k:
            return {}
        asked = int(kwargs.get("accumulate_grad_batches") or 1)
        kwargs["accumulate_grad_batches"] = asked * int(k)
        self.owned.add("grad_accum")
        self._act(
            "grad_accum",
            f"L.Trainer(accumulate_grad_batches={asked * int(k)}) set at {at} (the script "
            f"asked {asked}); Lightning accumulates itself",
        )
        return {"accumulate_grad_batches": asked * int(k)}

    def _held_by(self, what: str, at: str, held: dict[str, Any]) -> None:
        """Observed knobs a framework's own object holds (the user's command set them): acted when it holds the
        value asked for."""
        fields = {
            "accumulation_steps": "gradient_accumulation_steps"
            if what == "TrainingArguments"
            else "accumulate_grad_batches",
            "warmup_steps": "warmup_steps",
        }
        for knob, value in held.items():
            if knob not in self.observe:
                continue
            want = self.knobs.get(knob)
            text = f"{what}({fields[knob]}={value!r}) at {at}"
            if value == want:
                self._act(knob, f"{text}, as your command asks; the framework applies it itself")
            else:
                self._refuse(knob, f"{text}, not the {want!r} the changed command asks for")

    # -- the end ---------------------------------------------------------------------------------------------
    def finish(self) -> None:
        """Knobs nothing reached say why."""
        self._unreached(
            "batch_scale",
            "no torch DataLoader yielded a batch: the script makes its batches itself; "
            "change the batch size where it does",
        )
        self._unreached(
            "lr_scale", "no torch.optim optimizer was built: the script updates its weights itself"
        )
        if not self.accumulations:
            self._unreached(
                "grad_accum",
                "no torch.optim optimizer was built: the script updates its weights itself",
            )
        for acc in self.accumulations:
            if acc.stopped is None and acc.real_steps == 0:
                self._unreached(
                    "grad_accum", f"{acc.where}: the run ended before {acc.k} calls of step()"
                )
        self._unreached("optimizer_swap", "the script built no torch.optim.SGD to swap")
        self._unreached("warmup_steps", "no optimizer step ran")
        self._unreached(
            "batch_size",
            "no torch DataLoader yielded a batch: the changed command's batch size was not seen",
        )
        self._unreached(
            "lr", "no torch.optim optimizer was built: the changed command's rate was not seen"
        )
        self._unreached(
            "accumulation_steps", "no TrainingArguments or L.Trainer was built to hold it"
        )

    def _unreached(self, knob: str, why: str) -> None:
        if knob in self.knobs and (k := self.report.knob(knob)) is not None and k.acted is None:
            k.refuse(why)
