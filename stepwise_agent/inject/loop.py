"""What the script's own loop does, counted over its training steps for every run (``injected.json``'s ``settings``:
:mod:`stepwise_agent.inject.settings`) — and the proof of the knobs only that loop can turn, checked, never injected:
the patched arm of a fix the script's own flag makes (``--grad-accum-steps 2``, ``--activation-checkpointing``,
``--ddp-no-sync``, ``--cuda-graphs``). Each is proven by what its loop does:

- ``grad_accum_steps`` k: backward passes per optimizer step (the median over steps after the first) is k;
- ``activation_checkpointing``: ``torch.utils.checkpoint.checkpoint`` runs during the steps (and how often);
- ``ddp_no_sync``: a ``DistributedDataParallel.no_sync()`` context is entered (micro-batches that skip the
  all-reduce);
- ``cuda_graphs``: the script compiles its model with a CUDA-graph mode (``reduce-overhead``, ``max-autotune``) and
  a graph was compiled, or captures one itself (``torch.cuda.graph``, ``make_graphed_callables``).
"""

from __future__ import annotations

import statistics
from typing import Any, Callable

import torch

from stepwise_agent.inject.report import InjectionReport
from stepwise_agent.patching import Patches

LOOP_KNOBS = ("grad_accum_steps", "activation_checkpointing", "ddp_no_sync", "cuda_graphs")
GRAPH_MODES = ("reduce-overhead", "max-autotune")


class LoopObservation(Patches):
    """Counts, for the knobs of :data:`LOOP_KNOBS` the run observes, what the loop does (see the module docs)."""

    def __init__(self, knobs: dict[str, Any], report: InjectionReport) -> None:
        self.knobs = {k: v for k, v in knobs.items() if k in LOOP_KNOBS}
        self.report = report
        self.backwards = 0  # outermost backward passes since the last step
        self.per_step: list[int] = []
        self.checkpoints = 0
        self.no_syncs = 0
        self.graph_captures = 0
        self.comm_hooks: list[str] = []  # the DDP comm hooks the script registered, by name
        self.flags: dict[str, bool] = {}  # torch's process-wide flags as the first step found them
        self._depth = 0
        super().__init__()

    def install(self) -> None:
        import torch.utils.checkpoint as ckpt
        from torch.nn.parallel import DistributedDataParallel

        self._patch(torch.autograd, "backward", self._count_backward)
        self._patch(ckpt, "checkpoint", self._counter("checkpoints"))
        self._patch(DistributedDataParallel, "no_sync", self._counter("no_syncs"))
        self._patch(DistributedDataParallel, "register_comm_hook", self._hook_names)
        if hasattr(torch.cuda, "graph"):
            self._patch(torch.cuda, "graph", self._counter("graph_captures"))
        if hasattr(torch.cuda, "make_graphed_callables"):
            self._patch(torch.cuda, "make_graphed_callables", self._counter("graph_captures"))

    def _count_backward(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def backward(*args: Any, **kwargs: Any) -> Any:
            self._depth += 1
            try:
                return original(*args, **kwargs)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.backwards += 1

        return backward

    def _counter(self, attribute: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
            def counted(*args: Any, **kwargs: Any) -> Any:
                setattr(self, attribute, getattr(self, attribute) + 1)
                return original(*args, **kwargs)

            return counted

        return wrap

    def _hook_names(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def register(ddp: Any, state: Any, hook: Any) -> Any:
            self.comm_hooks.append(str(getattr(hook, "__name__", type(hook).__name__)))
            return original(ddp, state, hook)

        return register

    def on_step(self) -> None:
        if (
            not self.per_step
        ):  # the flags as they were for the first step (set by then, whatever the script does)
            self.flags = {
                "tf32": bool(torch.backends.cuda.matmul.allow_tf32)
                or torch.get_float32_matmul_precision() != "highest",
                "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
            }
        self.per_step.append(self.backwards)
        self.backwards = 0

    @property
    def backwards_per_step(self) -> int | None:
        """Backward passes per optimizer step: the median over the steps after the first (None: no step)."""
        counted = self.per_step[1:] or self.per_step
        return int(statistics.median(counted)) if counted else None

    def finish(self, compile_calls: list[dict[str, Any]], graphs: int) -> None:
        """Decide each observed knob from what the steps showed (``compile_calls``: the script's own
        ``torch.compile`` calls as recorded; ``graphs``: graphs torch.compile compiled)."""
        for knob, value in self.knobs.items():
            k = self.report.knob(knob)
            if k is None:
                continue
            if knob == "grad_accum_steps":
                counted = self.per_step[1:] or self.per_step
                seen = self.backwards_per_step or 0
                if seen == value:
                    k.act(
                        f"{seen} backward passes per optimizer step (median of {len(counted)} steps)"
                    )
                else:
                    k.refuse(
                        f"{seen} backward pass(es) per optimizer step, not the {value} the command asks for"
                    )
            elif knob == "activation_checkpointing":
                if self.checkpoints:
                    k.act(f"torch.utils.checkpoint ran {self.checkpoints} time(s) in the steps")
                else:
                    k.refuse("no torch.utils.checkpoint call ran in the steps")
            elif knob == "ddp_no_sync":
                if self.no_syncs:
                    k.act(
                        f"{self.no_syncs} micro-batch(es) ran under DistributedDataParallel.no_sync()"
                    )
                else:
                    k.refuse("no micro-batch ran under DistributedDataParallel.no_sync()")
            elif knob == "cuda_graphs":
                modes = [str((c.get("kwargs") or {}).get("mode")) for c in compile_calls]
                if self.graph_captures or (graphs and any(m in GRAPH_MODES for m in modes)):
                    how = (
                        f"{self.graph_captures} CUDA graph capture(s)"
                        if self.graph_captures
                        else f"torch.compile(mode={next(m for m in modes if m in GRAPH_MODES)!r}) compiled {graphs} graph(s)"
                    )
                    k.act(how)
                else:
                    k.refuse(
                        "no CUDA graph was captured: no torch.cuda.graph and no torch.compile with a graph mode"
                    )
