"""CUDA graphs: capture the step's kernels once and replay them with one launch.

The script's own CUDA-graphs switch first (``--cuda-graphs``); without one, ``torch.compile(mode="reduce-overhead")``
is injected on a GPU. On a CPU reduce-overhead captures nothing, so nothing is compiled there and the agent says
"CUDA graphs need a GPU" instead of timing an ordinary compile under this fix's name.
"""

from __future__ import annotations

from typing import Any

from advisors.bounds import Reach
from advisors.facts import Facts
from advisors.fit import spec_says
from advisors.fixes.base import ON_CPU, ON_CUDA, FixExample, FixSpec, Injection, const
from advisors.fixes.context import ScriptContext
from advisors.verdict import Bottleneck


def _reduce_overhead(ctx: ScriptContext) -> dict[str, Any]:
    return (
        {"compile": True, "compile_mode": "reduce-overhead"}
        if ctx.device == "cuda"
        else {"compile_mode": "reduce-overhead"}
    )


def launch_gaps(f: Facts) -> Reach | None:
    """A GPU step's launch gaps (``Facts.launch_idle``: idle time neither the loader nor a collective explains) —
    *if they vanished and the kernels ran back to back*; a replayed graph removes the host's per-launch cost, not
    the kernels' own time."""
    if not f.has_steps or f.b is None or f.device != "gpu":
        return None
    gaps = max(f.launch_idle, 0.0)
    return Reach(
        gaps,
        f"the GPU's launch gaps ({100 * gaps:.1f}% of the step) vanish: the kernels, replayed from a "
        "CUDA graph, run back to back",
    )


FIX = FixSpec(
    id="cuda_graphs",
    title="CUDA graphs (reduce-overhead compile)",
    bottleneck=Bottleneck.HOST,
    applies_to="cuda",
    explanation="Capture the step's kernels once and replay them with one launch instead of one launch per op: the "
    "host's per-op cost leaves the step. Shapes must stay the same from step to step.",
    snippet='model = torch.compile(model, mode="reduce-overhead")   # captures the step in CUDA graphs\n'
    "# a loop that keeps a step's outputs past the next step: torch.compiler.cudagraph_mark_step_begin()",
    docs="https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs",
    effort="config",
    settings={"cuda_graphs": True},
    alternatives=("larger_batch", "torch_compile"),
    own_flag=Injection(const(cuda_graphs=True), "cuda_graphs"),
    injection=Injection(_reduce_overhead, "compile_mode", "model_call"),
    done=spec_says(lambda s: s.cuda_graphs),
    bound=launch_gaps,
    examples=(
        FixExample(ON_CUDA, knobs={"compile": True, "compile_mode": "reduce-overhead"}),
        FixExample(ON_CPU, skipped="acts on CUDA only"),
    ),
)
