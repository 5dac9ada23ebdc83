"""Frameworks that build the DataLoader, the optimizer and the precision themselves: Hugging Face ``Trainer``
(``TrainingArguments``), PyTorch Lightning (``L.Trainer``) and accelerate (``Accelerator``).

A knob is injected at the framework's own switch, the one its user would type, so the framework builds what it
always builds, only configured differently — and the report records the user's call of that switch and exactly
which arguments were set there, which is the diff the Advisor shows:

- ``TrainingArguments(...)``: ``bf16``/``fp16``, ``dataloader_num_workers``, ``dataloader_pin_memory``,
  ``dataloader_persistent_workers``, ``dataloader_prefetch_factor``, ``torch_compile`` (``torch_compile_mode``
  for CUDA graphs), ``tf32``;
- ``L.Trainer(...)`` (``lightning`` or ``pytorch_lightning``): ``precision="bf16-mixed"`` / ``"16-mixed"`` (the
  one ``LightningCLI`` builds from the user's own ``--trainer.precision`` is recorded, never changed);
- ``L.Fabric(...)``: ``precision="bf16-mixed"`` / ``"16-mixed"``;
- the convergence knobs of ``--to-quality`` (:mod:`stepwise_agent.inject.convergence`): ``TrainingArguments``'
  ``per_device_train_batch_size``, ``learning_rate``, ``warmup_steps``, ``gradient_accumulation_steps``, and
  ``L.Trainer(accumulate_grad_batches=…)``;
- ``Accelerator(...)`` built by the user's own code: ``mixed_precision="bf16"`` / ``"fp16"``; what it was asked
  (``asked``: its ``mixed_precision``, ``dynamo_backend``, ``dynamo_plugin`` arguments) and what it then holds
  (``held``: its argument, else what ``accelerate launch --mixed_precision`` / ``--dynamo_backend`` passed it)
  are recorded.

The classes are patched when their module is first imported (an import hook), so a plain script pays nothing
and no framework is imported on its behalf. Evidence that a knob acted still comes from the objects the
framework built (worker processes seen, bf16 matmul outputs, graphs compiled), as for a plain script; the generic
wrapping of the model's forward is switched off for what the framework now does itself.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any, Callable, Sequence

from stepwise_agent.inject.convergence import ConvergenceInjection, where
from stepwise_agent.inject.modules import ModuleInjection
from stepwise_agent.inject.report import InjectionReport
from stepwise_agent.inject.sites import called_by_user, user_site
from stepwise_agent.switches import ACCELERATE_PRECISION, HF_FIELDS, LIGHTNING_PRECISION

#: knob values TrainingArguments validates against CUDA (``tf32=True``, ``fp16=True``)
CUDA_ONLY_FIELDS: dict[str, Callable[[Any], bool]] = {
    "matmul_precision": lambda v: True,
    "autocast": lambda v: v == "fp16",
    # CUDA graphs; HF would still compile on its mode alone
    "compile_mode": lambda v: v == "reduce-overhead",
}
PRECISION_FIELDS = ("precision", "mixed_precision")  # L.Trainer's and Accelerator's autocast switch
#: knobs each framework's switch owns (the generic injection stands aside for them)
OWNED = {
    "transformers": ("autocast", "compile"),
    "lightning": ("autocast",),
    "accelerate": ("autocast",),
    "fabric": ("autocast",),
}


class _PatchAfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Calls ``patch(module)`` right after one of ``names`` is first imported (the module is then complete)."""

    def __init__(self, patches: dict[str, Callable[[ModuleType], None]]) -> None:
        self.patches = patches
        self._loaders: dict[str, importlib.abc.Loader] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> Any:
        if fullname not in self.patches:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        self._loaders[fullname] = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loaders[spec.name].create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        name = module.__name__
        module.__spec__.loader = self._loaders[name]  # type: ignore[union-attr]
        self._loaders[name].exec_module(module)
        try:
            self.patches[name](module)
        except Exception as err:  # noqa: BLE001 - a framework we cannot patch trains as it was
            print(f"stepwise: {name} not patched: {type(err).__name__}: {err}", file=sys.stderr)


def _from_hf_parser() -> bool:
    """Whether ``TrainingArguments`` is being built by an ``HfArgumentParser`` (from the command line or a config
    file: the user's own arguments, built by the library on their behalf)."""
    return _built_by("transformers/hf_argparser.py")


def _built_by(*files: str) -> bool:
    """Whether a frame of one of the library ``files`` is on the stack: the object is built from the user's own
    arguments by that library (``HfArgumentParser``'s dataclasses, ``LightningCLI``'s Trainer)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.replace("\\", "/").endswith(files):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class FrameworkInjection:
    """Patches each framework's switch; records the user's call of it under ``sites`` (``training_arguments``,
    ``lightning_trainer``, ``accelerator``) and what was set there under ``report.frameworks``."""

    def __init__(
        self,
        knobs: dict[str, Any],
        report: InjectionReport,
        modules: ModuleInjection,
        convergence: ConvergenceInjection | None = None,
    ) -> None:
        self.knobs, self.report, self.modules = knobs, report, modules
        self.convergence = convergence
        self._undo: list[Callable[[], None]] = []
        self.frameworks: dict[str, dict[str, Any]] = {}
        self.observe: set[str] = (
            set()
        )  # knobs the script's own flags set: recorded as seen, never set here

    def install(self, more: dict[str, Callable[[ModuleType], None]] | None = None) -> None:
        patches: dict[str, Callable[[ModuleType], None]] = {
            **(more or {}),
            "transformers.training_args": self._patch_transformers,
            "lightning.pytorch.trainer.trainer": self._patch_lightning,
            "pytorch_lightning.trainer.trainer": self._patch_lightning,
            "accelerate.accelerator": self._patch_accelerate,
            "lightning.fabric.fabric": self._patch_fabric,
            "lightning.pytorch.cli": self._patch_lightning_cli,
            "pytorch_lightning.cli": self._patch_lightning_cli,
        }
        for name in [
            n for n in patches if n in sys.modules
        ]:  # imported before us (a sitecustomize)
            patches.pop(name)(sys.modules[name])
        finder = _PatchAfterImport(patches)
        sys.meta_path.insert(0, finder)
        self._undo.append(lambda: sys.meta_path.remove(finder) if finder in sys.meta_path else None)

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def to_json(self) -> dict[str, Any]:
        return self.frameworks

    # -- the switches ---------------------------------------------------------------------------------------
    def _record(
        self,
        framework: str,
        what: str,
        site: dict[str, Any] | None,
        cls: type,
        set_: dict[str, Any],
        asked: dict[str, Any],
    ) -> None:
        if site is None:
            return
        self.report.site(what, site, type=cls.__name__, framework=framework)
        entry = self.frameworks.setdefault(
            framework, {"site": what, "class": cls.__name__, "set": {}, "asked": {}}
        )
        entry["set"].update(set_)
        entry["asked"].update(asked)
        owned = [
            k for k in OWNED[framework] if k in self.knobs and k in self._knobs_set(framework, set_)
        ]
        self.modules.framework_owns.update(owned)
        for knob in self._knobs_set(framework, set_):
            if (
                k := self.report.knob(knob)
            ) is not None:  # how it was set; whether it acted is seen later
                fields = (
                    HF_FIELDS[knob](self.knobs[knob])
                    if framework == "transformers"
                    else PRECISION_FIELDS
                )
                args = ", ".join(f"{f}={v!r}" for f, v in set_.items() if f in fields)
                at = f"{site['file'].rsplit('/', 1)[-1]}:{site['line']}"
                k.evidence.append(
                    f"{cls.__name__}({args}) at {at}, from the script's own command line or config"
                    if knob in self.observe
                    else f"{cls.__name__}({args}) set at {at}"
                )

    def _knobs_set(self, framework: str, set_: dict[str, Any]) -> list[str]:
        if framework == "transformers":
            return [
                k
                for k in self.knobs
                if k in HF_FIELDS and set(HF_FIELDS[k](self.knobs[k])) & set(set_)
            ]
        return ["autocast"] if set(set_) & set(PRECISION_FIELDS) else []

    def _precision_here(self) -> bool:
        """fp16 mixed precision is a CUDA mode the frameworks refuse on a CPU (the generic injection then says
        why); bf16 runs on both."""
        return self.knobs.get("autocast") != "fp16" or self.modules.device == "cuda"

    def _patch_transformers(self, module: ModuleType) -> None:
        cls = module.TrainingArguments
        original = cls.__post_init__
        me = self

        def post_init(args: Any) -> None:
            if (
                called_by_user(2) or _from_hf_parser()
            ):  # the user's own, or their HfArgumentParser's
                set_: dict[str, Any] = {}
                asked: dict[str, Any] = {}
                for knob, value in me.knobs.items():
                    if knob not in HF_FIELDS or (
                        knob == "autocast" and value not in ("bf16", "fp16")
                    ):
                        continue
                    if (
                        knob in me.observe
                    ):  # the user's own --bf16 / config line set it: say what it holds
                        fields = {
                            f: getattr(args, f, None)
                            for f, v in HF_FIELDS[knob](value).items()
                            if v
                        }
                        asked.update(fields)
                        set_.update({f: v for f, v in fields.items() if v})
                        continue
                    if (
                        knob in CUDA_ONLY_FIELDS
                        and CUDA_ONLY_FIELDS[knob](value)
                        and me.modules.device != "cuda"
                    ):
                        continue  # TrainingArguments refuses these without CUDA: the generic injection says why
                    for field, new in HF_FIELDS[knob](value).items():
                        if (
                            field in ("fp16", "bf16")
                            and new is False
                            and not getattr(args, field, False)
                        ):
                            continue  # not switched off: it was off
                        asked[field] = getattr(args, field, None)
                        setattr(args, field, new)
                        set_[field] = new
                site = user_site(2)
                if me.convergence is not None and site is not None:
                    more, before = me.convergence.training_arguments(args, where(site))
                    set_.update(more)
                    asked.update(before)
                me._record(
                    "transformers", "training_arguments", user_site(2), type(args), set_, asked
                )
            original(args)

        cls.__post_init__ = post_init
        self._undo.append(lambda: setattr(cls, "__post_init__", original))

    def _patch_lightning(self, module: ModuleType) -> None:
        cls = module.Trainer
        original = cls.__init__
        me = self

        @functools.wraps(
            original
        )  # its signature kept: LightningCLI builds its trainer.* options from it
        def init(trainer: Any, *args: Any, **kwargs: Any) -> None:
            cli = "autocast" in me.observe and _built_by(
                "lightning/pytorch/cli.py", "pytorch_lightning/cli.py"
            )
            if (
                called_by_user(2) or cli
            ):  # the user's, or LightningCLI's from the user's own --trainer.precision
                set_: dict[str, Any] = {}
                asked = {"precision": kwargs.get("precision")}
                want = LIGHTNING_PRECISION.get(str(me.knobs.get("autocast")))
                if (
                    "autocast" in me.observe
                    and want is not None
                    and str(kwargs.get("precision")) == want
                ):
                    set_["precision"] = kwargs[
                        "precision"
                    ]  # the user's own --trainer.precision / config line
                elif me._precision_here() and want is not None and "autocast" not in me.observe:
                    kwargs["precision"] = set_["precision"] = want
                site = user_site(2)
                if me.convergence is not None and site is not None:
                    before = kwargs.get("accumulate_grad_batches")
                    if more := me.convergence.lightning_trainer(kwargs, where(site)):
                        set_.update(more)
                        asked["accumulate_grad_batches"] = before
                me._record("lightning", "lightning_trainer", site, cls, set_, asked)
            original(trainer, *args, **kwargs)

        cls.__init__ = init
        self._undo.append(lambda: setattr(cls, "__init__", original))

    def _patch_fabric(self, module: ModuleType) -> None:
        """Lightning Fabric's own switch: ``L.Fabric(precision="bf16-mixed")`` (its ``setup`` then runs the model
        under that precision's autocast): the generic wrapping of the forward stands aside."""
        cls = module.Fabric
        original = cls.__init__
        me = self

        @functools.wraps(original)
        def init(fabric: Any, *args: Any, **kwargs: Any) -> None:
            if called_by_user(2):
                set_: dict[str, Any] = {}
                asked = {"precision": kwargs.get("precision")}
                want = LIGHTNING_PRECISION.get(str(me.knobs.get("autocast")))
                if (
                    "autocast" in me.observe
                    and want is not None
                    and str(kwargs.get("precision")) == want
                ):
                    set_["precision"] = kwargs["precision"]  # the script's own flag set it
                elif me._precision_here() and want is not None and "autocast" not in me.observe:
                    kwargs["precision"] = set_["precision"] = want
                me._record("fabric", "fabric", user_site(2), cls, set_, asked)
            original(fabric, *args, **kwargs)

        cls.__init__ = init
        self._undo.append(lambda: setattr(cls, "__init__", original))

    def _patch_lightning_cli(self, module: ModuleType) -> None:
        """LightningCLI saves its config as ``config.yaml`` in the log dir and refuses to start when one is there:
        with ``logger=False`` that dir is the working directory, so the second run of an A/B (or any re-run)
        failed on the first run's file. Stepwise's runs overwrite it, as ``save_config_kwargs={"overwrite":
        True}`` would, and say so (``frameworks.lightning_cli``); the file written is the one the run parsed."""
        cls = getattr(module, "SaveConfigCallback", None)
        if cls is None:
            return
        original = cls.__init__
        me = self

        @functools.wraps(original)
        def init(callback: Any, *args: Any, **kwargs: Any) -> None:
            original(callback, *args, **kwargs)
            if not getattr(callback, "overwrite", True):
                callback.overwrite = True
                me.frameworks.setdefault("lightning_cli", {})["save_config"] = (
                    "overwrite=True: a run under Stepwise rewrites the config.yaml an earlier run saved instead of "
                    "refusing to start (LightningCLI's default with save_config_kwargs unset)"
                )

        cls.__init__ = init
        self._undo.append(lambda: setattr(cls, "__init__", original))

    def _patch_accelerate(self, module: ModuleType) -> None:
        cls = module.Accelerator
        original = cls.__init__
        me = self

        @functools.wraps(original)
        def init(acc: Any, *args: Any, **kwargs: Any) -> None:
            if not called_by_user(
                2
            ):  # the Trainer's own Accelerator follows TrainingArguments instead
                original(acc, *args, **kwargs)
                return
            set_: dict[str, Any] = {}
            asked = {
                "mixed_precision": kwargs.get("mixed_precision"),
                **{k: _text(kwargs.get(k)) for k in ("dynamo_backend", "dynamo_plugin")},
            }
            want = ACCELERATE_PRECISION.get(str(me.knobs.get("autocast")))
            if me._precision_here() and want is not None and "autocast" not in me.observe:
                kwargs["mixed_precision"] = set_["mixed_precision"] = want
            site = user_site(2)
            original(acc, *args, **kwargs)
            held = getattr(
                acc, "mixed_precision", None
            )  # its argument, else accelerate launch --mixed_precision
            if "autocast" in me.observe and want is not None and str(held) == want:
                set_["mixed_precision"] = held
            me._record("accelerate", "accelerator", site, cls, set_, asked)
            if "accelerate" in me.frameworks:
                dynamo = getattr(
                    getattr(getattr(acc, "state", None), "dynamo_plugin", None), "backend", None
                )
                me.frameworks["accelerate"].update(
                    at=site, held={"mixed_precision": str(held), "dynamo_backend": _text(dynamo)}
                )
                if (
                    "compile" in me.observe
                    and _text(dynamo) not in (None, "NO")
                    and site is not None
                    and (k := me.report.knob("compile")) is not None
                ):  # prepare() torch.compiles the model
                    k.evidence.append(
                        f"{cls.__name__}(dynamo_backend={_text(dynamo)!r}) at "
                        f"{site['file'].rsplit('/', 1)[-1]}:{site['line']}, from the script's own "
                        "command line (accelerate launch): its prepare() compiles the model"
                    )

        cls.__init__ = init
        self._undo.append(lambda: setattr(cls, "__init__", original))


def _text(value: Any) -> str | None:
    """An argument as the record holds it: ``None``, or its text (an enum's value, a plugin's repr)."""
    return None if value is None else str(getattr(value, "value", value))
