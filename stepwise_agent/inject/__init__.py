"""Fix injection at boot: the launcher applies a fix to a script nobody changed, by patching, for the length of
one run, the library objects the script builds (see ``loader``, ``modules``, ``optim``). The script's files are
never read for execution differently nor written.

:class:`Injector` installs every part, hears each training step (the second one ends the model watch and routes
fp16 steps through the GradScaler), and at the end returns the report: per knob whether it acted and the
evidence; the user's call sites of DataLoader, optimizer, DDP and model call, and of a framework's switch
(``TrainingArguments``, ``L.Trainer``, ``Accelerator``; see ``frameworks``) with what was set there.
Closures given to ``optimizer.step`` are marked for the trace (``closure``). Hand-written attention
modules get ``scaled_dot_product_attention`` once shown equal on their own input (``attention``); named
blocks run under ``torch.utils.checkpoint`` (``checkpoint``). With no knobs it still records
the call sites, which is what the Advisor needs to point at the line to change. The convergence knobs of
``optimize --to-quality`` (batch × k, learning rate scaled, warm-up, gradient accumulation, SGD → AdamW) act
through the same DataLoader and optimizer hooks (``convergence``, ``accumulate``). Knobs only the script's own loop
can turn (accumulation, the script's own checkpointing switch, ``no_sync``, CUDA graphs) are never injected: set
by its own flags, they are checked (``loop``). :meth:`Injector.snapshot`
is the report so far, written during the run: a to-quality run is stopped from outside once it reaches its
target, and its report must already be there.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import torch

from stepwise_agent.capabilities import TorchCapabilities, detect
from stepwise_agent.inject.config import ConfigRecorder
from stepwise_agent.hostinfo import available_memory_bytes
from stepwise_agent.inject.attention import AttentionInjection
from stepwise_agent.inject.checkpoint import CheckpointInjection
from stepwise_agent.inject.closure import annotate_closures
from stepwise_agent.inject.convergence import ConvergenceInjection
from stepwise_agent.inject.environment import EnvironmentCheck
from stepwise_agent.inject.frameworks import FrameworkInjection
from stepwise_agent.inject.loader import LoaderInjection
from stepwise_agent.inject.loop import LoopObservation
from stepwise_agent.inject.modules import ModuleInjection
from stepwise_agent.inject.optim import OptimInjection
from stepwise_agent.inject.report import InjectionReport
from stepwise_agent.inject.threads import ThreadsInjection

__all__ = ["Injector", "InjectionReport"]

#: Model calls are watched through this many detected steps: with two optimizers (a GAN) the first detected step
#: ends at the first one's ``step()``, before the second model's calls; a whole cycle has run by the second.
WATCH_STEPS = 2


class Injector:
    def __init__(
        self,
        knobs: dict[str, Any],
        device: str | None = None,
        on_skipped_step: Callable[[Any], None] | None = None,
        caps: TorchCapabilities | None = None,
        observe: dict[str, Any] | None = None,
        target: list[str] | None = None,
    ) -> None:
        """``observe``: knobs the script's own command line or config file sets in this run (the patched arm of a
        fix mapped to the script's flag): their effect is checked and reported like an injected knob's, but
        nothing is injected for them. ``target``: the script and its arguments (``-m MODULE`` …), whose
        configuration is recorded (:mod:`stepwise_agent.inject.config`)."""
        self.caps = caps or detect(torch)
        observe = dict(observe or {})
        knobs = {**knobs, **observe}
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.report = InjectionReport(dict(knobs))
        self.knobs: dict[
            str, Any
        ] = {}  # what torch can do here; a knob it cannot is refused for good, before the script runs
        for name, value in knobs.items():
            why = self.caps.refusal(name, value, self.device)
            if why is None:
                self.knobs[name] = value
            elif (k := self.report.knob(name)) is not None:
                k.refuse(why, final=True)
        self.convergence = ConvergenceInjection(self.knobs, self.report, on_skipped_step)
        self.loader = LoaderInjection(
            self.knobs, self.report, available_memory_bytes(), self.convergence
        )
        self.modules = ModuleInjection(self.knobs, self.report, self.device, self.caps)
        self.optim = OptimInjection(self.knobs, self.report, self.caps, self.convergence)
        self.optim.on_skipped_step = on_skipped_step
        self.frameworks = FrameworkInjection(
            self.knobs, self.report, self.modules, self.convergence
        )
        self.loop = LoopObservation(
            self.knobs, self.report
        )  # knobs only the script's own loop turns
        self.threads = ThreadsInjection(self.knobs, self.report)
        self.environment = EnvironmentCheck(self.knobs, self.report)
        self.attention = AttentionInjection(self.knobs, self.report, self._module_name)
        self.checkpoint = CheckpointInjection(self.knobs, self.report)
        self.modules.on_model.append(self.checkpoint.on_model)
        self.modules.not_models = self.checkpoint.inside
        self.observe = set(observe)
        self.loader.observe = self.frameworks.observe = self.modules.observed = (
            self.convergence.observe
        ) = self.observe
        self.modules.framework_owns.update(
            self.observe & {"autocast", "compile"}
        )  # watched, not wrapped
        target = list(target or [])
        script = None if not target or target[0] == "-m" else os.path.abspath(target[0])
        self.config = ConfigRecorder(target[2:] if target[:1] == ["-m"] else target[1:], script)
        for name in self.observe:
            if (k := self.report.knob(name)) is not None and name in self.knobs:
                k.evidence.append(
                    "set by the script's own command line or config file, not injected"
                )
        self._undo: list[Callable[[], None]] = []
        self.steps = 0

    def install(self) -> None:
        if "alloc_conf" in self.knobs:
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = self.knobs["alloc_conf"]
            k = self.report.knob("alloc_conf")
            if k is not None:
                if self.device == "cuda":
                    k.act(
                        f"PYTORCH_CUDA_ALLOC_CONF={self.knobs['alloc_conf']} set before the first CUDA allocation"
                    )
                else:
                    k.refuse("the CUDA caching allocator is not used on the CPU")
        self.threads.install()
        self.convergence.install()
        self.loop.install()
        self.loader.install()
        self.modules.install()
        self.attention.install()
        self.optim.install()
        self.frameworks.install(
            {
                "transformers.hf_argparser": self.config.patch_transformers,
                "jsonargparse._core": self.config.patch_jsonargparse,
                "hydra.core.utils": self.config.patch_hydra,
            }
        )
        self.config.install()
        self._undo.append(self.config.uninstall)
        self._undo.append(annotate_closures())
        if self.knobs.get("autocast") == "fp16":
            self._scale_backward()

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()
        self.frameworks.uninstall()
        self.optim.uninstall()
        self.attention.uninstall()
        self.modules.uninstall()
        self.loader.uninstall()
        self.loop.uninstall()
        self.convergence.uninstall()

    def on_step(self) -> None:
        self.steps += 1
        self.loop.on_step()
        self.modules.step_begins()
        if self.steps == 1:
            self.config.on_first_step()
            self.threads.first_step(self.report.loader.get("num_workers"))
            self.environment.first_step()
        if self.steps == WATCH_STEPS:
            self.modules.stop_watching()
            self.attention.stop_watching()

    def _module_name(self, module: torch.nn.Module) -> str:
        """``module``'s qualified name in the model the script trains ("" when it is in none)."""
        for model in self.modules.models:
            inner = getattr(model, "module", model)  # DistributedDataParallel's inner model
            name = next((n for n, m in inner.named_modules() if m is module), None)
            if name is not None:
                return name
        return ""

    def _scale_backward(self) -> None:
        """fp16: ``loss.backward()`` becomes ``scaler.scale(loss).backward()``; steps go through the scaler."""
        original = torch.Tensor.backward
        me = self

        def backward(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            scaler = me.modules.scaler
            if scaler is not None and tensor.numel() == 1:
                if me.optim.scaler is None:
                    me.optim.scale_steps(scaler)
                tensor = scaler.scale(tensor)
            return original(tensor, *args, **kwargs)

        setattr(torch.Tensor, "backward", backward)  # a wrapper of a wider signature, undone below
        self._undo.append(lambda: setattr(torch.Tensor, "backward", original))

    def finish(self) -> dict[str, Any]:
        """The report, once the run is over (evidence that needs the whole run is decided here)."""
        self.loader.finish()
        self.modules.finish()
        self.attention.finish()
        self.checkpoint.finish()
        self.optim.finish()
        self.convergence.finish()
        from stepwise_agent.inject.modules import compiled_graphs

        self.loop.finish(self.config.compile_calls, compiled_graphs()[0])
        report = self.report.to_json()
        return {
            **report,
            "frameworks": self.frameworks.to_json(),
            "config": self._config(),
            "observed": sorted(self.observe),
            "threads": self.threads.facts,
            "settings": self._settings(report),
        }

    def snapshot(self) -> dict[str, Any]:
        """The report so far (``partial``: knobs not yet decided read as not acted), without the end's checks."""
        report = self.report.to_json()
        return {
            **report,
            "frameworks": self.frameworks.to_json(),
            "config": self._config(),
            "observed": sorted(self.observe),
            "threads": self.threads.facts,
            "partial": True,
            "settings": self._settings(report),
        }

    def _settings(self, report: dict[str, Any]) -> dict[str, Any]:
        """How the run was configured, as its objects showed it (:mod:`stepwise_agent.inject.settings`)."""
        from stepwise_agent.inject.settings import run_settings

        try:
            return run_settings(report, self.config.to_json(), self.loop, self.modules.models)
        except Exception:  # noqa: BLE001 - a record of the run must never fail the run
            return {}

    def _config(self) -> dict[str, Any]:
        """How the script is configured, with the switches its framework was built with (an ``Accelerator``'s
        ``mixed_precision``: what a launcher option reaches)."""
        return {**self.config.to_json(), "frameworks": self.frameworks.to_json()}
