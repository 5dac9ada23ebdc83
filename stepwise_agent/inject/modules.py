"""Model knobs, injected around the script's outermost module call: ``autocast`` (bf16, or fp16 with a
GradScaler on CUDA), ``compile`` (``Module.compile()`` in place; with ``compile_mode="reduce-overhead"`` inductor
captures the step in CUDA graphs — on CUDA only: on a CPU it would capture none, so nothing is compiled and the
knob says why), ``channels_last``; and the process-wide flags ``matmul_precision`` (TF32) and ``cudnn_benchmark``.

The outermost module is found on the fly: while the first two steps run, ``nn.Module.__call__`` is watched; a
module with parameters called while no other module call is in progress is a model the script trains (a GAN
has two). Its ``forward`` is wrapped on the instance only, and the class-wide watch is removed after the first
step so the rest of the run pays nothing for it. Until then the lines that constructed and moved each module
are noted (:mod:`stepwise_agent.inject.built`): a model's is its ``model_build`` site. Low-precision outputs
leave the wrapped forward as fp32, so the script's loss is computed as before.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_map

from stepwise_agent.capabilities import TorchCapabilities, autocast_context, detect, grad_scaler
from stepwise_agent.inject.built import BuildSites
from stepwise_agent.inject.report import InjectionReport
from stepwise_agent.inject.sites import user_site

LOW = {"bf16": torch.bfloat16, "fp16": torch.float16}
_MATH = (
    nn.Linear,
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.MultiheadAttention,
    nn.Bilinear,
    nn.LSTM,
    nn.GRU,
)
_CONV = (
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
)


def _to_fp32(x: Any) -> Any:
    return (
        x.float()
        if isinstance(x, torch.Tensor) and x.dtype in (torch.bfloat16, torch.float16)
        else x
    )


def _channels_last(x: Any) -> Any:
    return (
        x.contiguous(memory_format=torch.channels_last)
        if isinstance(x, torch.Tensor) and x.dim() == 4
        else x
    )


def set_forward(module: nn.Module, forward: Callable[..., Any]) -> None:
    """``forward`` on this one instance, past any ``__setattr__`` of the module's class: a wrapper such as
    Lightning Fabric's ``_FabricModule`` passes attribute sets on to the module it wraps, whose forward would
    then call the wrapper's, which calls it again (a RecursionError at step 0)."""
    object.__setattr__(module, "forward", forward)


class ModuleInjection:
    def __init__(
        self,
        knobs: dict[str, Any],
        report: InjectionReport,
        device: str,
        caps: TorchCapabilities | None = None,
    ) -> None:
        self.knobs, self.report, self.device = knobs, report, device
        self.caps = caps or detect(torch)
        self.models: list[nn.Module] = []
        self.scaler: Any = None
        self._local = threading.local()
        self._undo: list[Callable[[], None]] = []
        self._watching = False
        self._low_outputs = 0
        self._math_outputs: list[torch.dtype] = []
        #: knobs a framework applies itself at its own switch (``TrainingArguments(bf16=True)``,
        #: ``L.Trainer(precision=...)``): the model is then watched for evidence, not wrapped a second time
        self.framework_owns: set[str] = set()
        self.observed: set[str] = set()  # knobs the script's own flags set (checked, not injected)
        self.build_sites = (
            BuildSites()
        )  # where each model was constructed and moved, until the watch ends
        #: called with each model the script trains, when it is first seen (before its forward)
        self.on_model: list[Callable[[nn.Module], None]] = []
        #: ids of modules that are never a model: a checkpointed block's, whose recomputation in
        #: backward calls them outside any model call
        self.not_models: set[int] = set()

    # -- install / uninstall ---------------------------------------------------------------------------------
    def install(self) -> None:
        self._flags()
        original_call = nn.Module.__call__
        me = self

        def call(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
            depth = getattr(me._local, "depth", 0)
            if depth == 0 and me._watching:
                me._seen(module)
            me._local.depth = depth + 1
            try:
                return original_call(module, *args, **kwargs)
            finally:
                me._local.depth = depth

        nn.Module.__call__ = call  # type: ignore[method-assign]
        self._watching = True
        self._undo.append(lambda: setattr(nn.Module, "__call__", original_call))
        self.build_sites.install()
        self._undo.append(self.build_sites.uninstall)

    def stop_watching(self) -> None:
        """After the first steps: the models are known; remove the class-wide hook (it costs every call)."""
        if self._watching:
            self._watching = False
            self.uninstall()

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    # -- process-wide flags ------------------------------------------------------------------------------------
    def _flags(self) -> None:
        r = self.report
        if "matmul_precision" in self.knobs:
            torch.set_float32_matmul_precision(self.knobs["matmul_precision"])
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            k = r.knob("matmul_precision")
            if k is not None:
                if self.device == "cuda":
                    k.act(
                        f"float32 matmul precision '{self.knobs['matmul_precision']}': TF32 Tensor Core GEMMs"
                    )
                else:
                    k.refuse("TF32 is a CUDA Tensor Core mode; this run is on the CPU")
        if self.knobs.get("cudnn_benchmark"):
            torch.backends.cudnn.benchmark = True
        if (
            self.knobs.get("compile_mode")
            and not self._graphs_here()
            and (k := r.knob("compile_mode")) is not None
        ):
            k.refuse(
                "CUDA graphs need a GPU (this run is on the CPU, where reduce-overhead compile captures none)",
                final=True,
            )

    def _graphs_here(self) -> bool:
        """A reduce-overhead compile captures CUDA graphs on CUDA only: elsewhere it is not done at all."""
        return self.knobs.get("compile_mode") != "reduce-overhead" or self.device == "cuda"

    def step_begins(self) -> None:
        """A new training step: CUDA graph trees start a new generation here, so outputs the script keeps from
        the step before (its loss, for logging) are not overwritten under it by the next replay."""
        if (
            self.knobs.get("compile_mode") == "reduce-overhead"
            and self.device == "cuda"
            and self.models
        ):
            mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
            if mark is not None:
                mark()

    # -- the models ------------------------------------------------------------------------------------------
    def _seen(self, module: nn.Module) -> None:
        if id(module) in self.not_models or not any(True for _ in module.parameters()):
            return
        inner = getattr(
            module, "module", module
        )  # DistributedDataParallel wraps the script's model
        convolutions = sum(isinstance(m, _CONV) for m in inner.modules())
        # every top-level call of the watched steps is a site (a GAN calls its discriminator twice)
        self.report.site(
            "model_call",
            user_site(3),
            type=type(module).__name__,
            convolutions=convolutions,
            grad=torch.is_grad_enabled(),
        )  # False: an evaluation call (no_grad), not the training one
        if any(m is module for m in self.models):
            return
        self.models.append(module)
        # the line that ran to build (or move) the model the change acts on: the one compiled, DDP's inner
        self.report.site(
            "model_build",
            self.build_sites.site_of(inner) or self.build_sites.site_of(module),
            type=type(inner).__name__,
        )
        for seen in self.on_model:
            seen(module)
        if self.knobs.get("channels_last"):
            self._make_channels_last(module, inner)
        if (
            self.knobs.get("cudnn_benchmark")
            and (k := self.report.knob("cudnn_benchmark")) is not None
        ):
            if self.device != "cuda":
                k.refuse(
                    "cudnn.benchmark picks cuDNN convolution algorithms; this run is on the CPU"
                )
            elif not convolutions:
                k.refuse("the model has no convolution for cuDNN to tune")
            else:
                k.act(f"cuDNN autotunes the algorithms of {convolutions} convolution layers")
        if self.knobs.get("autocast") in LOW:
            self._autocast(module, inner, wrap="autocast" not in self.framework_owns)
        mode = self.knobs.get("compile_mode")
        if (
            (self.knobs.get("compile") or mode)
            and self._graphs_here()
            and "compile" not in self.framework_owns
        ):
            kw = {"mode": mode} if mode else {}
            if self.caps.module_compile:
                inner.compile(**kw)
            else:  # torch < 2.2 has no Module.compile: compile the forward in place instead
                inner.forward = torch.compile(inner.forward, **kw)
            self.report.site("compile", None)

    def _make_channels_last(self, module: nn.Module, inner: nn.Module) -> None:
        k = self.report.knob("channels_last")
        four_d = [p for p in inner.parameters() if p.dim() == 4]
        if k is None:
            return
        if not four_d:
            k.refuse("the model has no 4-D (convolution) weights: channels_last changes nothing")
            return
        if inner is not module:
            k.refuse(
                "the model is already wrapped in DistributedDataParallel; channels_last must be set before"
            )
            return
        # Module.to documents to(memory_format=...); torch's overloads omit it
        inner.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        original = module.forward

        def forward(*args: Any, **kwargs: Any) -> Any:
            return original(*tree_map(_channels_last, args), **tree_map(_channels_last, kwargs))

        set_forward(module, forward)
        k.act(f"{len(four_d)} convolution weights and 4-D inputs in channels_last (NHWC) layout")

    def _autocast(self, module: nn.Module, inner: nn.Module, wrap: bool = True) -> None:
        name = self.knobs["autocast"]
        dtype = LOW[name]
        original = module.forward
        device_type = self.device
        me = self

        def forward(*args: Any, **kwargs: Any) -> Any:
            with autocast_context(torch, me.caps, device_type, dtype):
                out = original(*args, **kwargs)
            leaves, _ = tree_flatten(out)
            me._low_outputs += sum(isinstance(x, torch.Tensor) and x.dtype == dtype for x in leaves)
            return tree_map(_to_fp32, out)

        if wrap:
            set_forward(module, forward)
        hooks: list[Any] = []

        def math_hook(m: nn.Module, inputs: Any, output: Any) -> None:
            first = next((x for x in tree_flatten(output)[0] if isinstance(x, torch.Tensor)), None)
            if first is not None and first.is_floating_point():
                me._math_outputs.append(first.dtype)
            for h in hooks:
                h.remove()
            hooks.clear()

        hooks.extend(
            m.register_forward_hook(math_hook) for m in inner.modules() if isinstance(m, _MATH)
        )
        if name == "fp16" and wrap:  # fp16's narrow range needs loss scaling (bf16's does not)
            self.scaler = grad_scaler(torch, self.caps, device_type)

    def finish(self) -> None:
        """Decide what acted, from what the models' calls showed."""
        r = self.report
        if (k := r.knob("autocast")) is not None:
            dtype = LOW.get(self.knobs["autocast"])
            if not self.models:
                k.refuse("no module with parameters was called at the top level")
            elif dtype in self._math_outputs or self._low_outputs:
                seen = (
                    "its first matmul/convolution layer ran"
                    if dtype in self._math_outputs
                    else "its output was"
                )
                names = ", ".join(f"{type(m).__name__}.forward" for m in self.models)
                how = (
                    "by the script's own switch, on"
                    if "autocast" in self.observed
                    else "by the framework's own switch, on"
                    if "autocast" in self.framework_owns
                    else "around"
                )
                k.act(
                    f"{self.knobs['autocast']} autocast {how} {names} ({len(self.models)} model(s)): {seen} in "
                    f"{self.knobs['autocast']}"
                    + ("; loss scaled by a GradScaler" if self.scaler else "")
                )
            else:
                k.refuse(
                    f"under autocast the model's layers still produced "
                    f"{', '.join(sorted({str(d) for d in self._math_outputs})) or 'no floating outputs'}"
                )
        if (k := r.knob("compile_mode")) is not None and not k.final:
            self._judge_graphs(k)
        if (k := r.knob("compile")) is not None:
            graphs, breaks = compiled_graphs()
            if graphs:
                k.act(
                    f"torch.compile traced {graphs} graph(s)"
                    + (f", {breaks} graph break(s)" if breaks else "")
                )
            else:
                k.refuse(
                    "torch.compile was set on the model but no graph was compiled"
                    if self.models
                    else "no module with parameters was called at the top level"
                )

    def _judge_graphs(self, k: Any) -> None:
        """``compile_mode``: acted when the compiled graphs were captured in CUDA graphs (inductor's tree manager
        holds them; where this torch does not show it, when no graph skipped them)."""
        graphs, _ = compiled_graphs()
        captured, skipped = cuda_graph_counts()
        mode = self.knobs["compile_mode"]
        if not graphs:
            k.refuse(
                f"no graph was compiled (mode={mode!r}), so none was captured in a CUDA graph"
                if self.models
                else "no module with parameters was called at the top level"
            )
        elif mode != "reduce-overhead":
            k.act(f"torch.compile(mode={mode!r}) traced {graphs} graph(s)")
        elif captured == 0 or (captured is None and skipped):
            k.refuse(
                f"torch.compile traced {graphs} graph(s) but inductor captured no CUDA graph"
                + (
                    f" ({skipped} skipped: the run's log says why, e.g. CPU tensors in the graph, dynamic "
                    "shapes, inputs mutated in place)"
                    if skipped
                    else ""
                )
            )
        else:
            k.act(
                f"torch.compile(mode='reduce-overhead') traced {graphs} graph(s), replayed as "
                + (f"{captured} CUDA graph(s)" if captured else "CUDA graphs (none skipped)")
                + (f"; {skipped} graph(s) skipped CUDA graphs" if skipped else "")
            )


def cuda_graph_counts() -> tuple[int | None, int]:
    """(CUDA graphs inductor's tree manager recorded on this device — ``None`` where this torch does not show
    them —, graphs that skipped CUDA graphs) in this process."""
    try:
        from torch._dynamo.utils import counters

        skipped = int(counters["inductor"].get("cudagraph_skips", 0))
    except ImportError:
        skipped = 0
    if not torch.cuda.is_available():
        return 0, skipped
    try:
        from torch._inductor import cudagraph_trees

        manager = cudagraph_trees.get_manager(
            torch.cuda.current_device(), create_if_none_exists=False
        )
        if manager is None:
            return 0, skipped
        stack = [n for nodes in manager.roots.values() for n in nodes]
        count = 0
        while (
            stack
        ):  # the recorded graphs form a tree per function (a forward, then its backward, …)
            node = stack.pop()
            count += 1
            stack.extend(c for kids in getattr(node, "children", {}).values() for c in kids)
        return count, skipped
    except Exception:  # noqa: BLE001 - private API of inductor: where it differs, say unknown, never fail the run
        return None, skipped


def compiled_graphs() -> tuple[int, int]:
    """(graphs compiled, graph breaks) in this process, from torch._dynamo's counters."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return 0, 0
    return int(counters["stats"].get("unique_graphs", 0)), int(
        sum(counters["graph_break"].values())
    )
