"""Name-based classification of GPU kernels and host ops (NVIDIA, AMD/ROCm and CPU names alike).

Classes of device time: ``communication`` (NCCL/RCCL/HCCL collectives, NVSHMEM, DeepEP's
expert-parallel dispatch and combine), ``normalization`` (norms, softmax),
``matmul`` (GEMM, convolution, attention: the Tensor-Core-able work), ``elementwise`` (pointwise, reductions,
indexing, fused Triton kernels), ``memory`` (memcpy / memset activities), ``other``.
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np
import pandas as pd

KERNEL_CLASSES = ("matmul", "normalization", "elementwise", "communication", "memory", "other")

#: DeepEP's expert-parallel kernels (``deep_ep::internode::dispatch``, ``combine``,
#: ``notify_dispatch``, ``cached_notify``; DeepSeek's own traces spell the namespace ``dpsk::ep``):
#: all-to-all exchanges of tokens.
EXPERT_PARALLEL = r"deep_?ep::|dpsk::ep::"
COMM_KERNEL = re.compile(
    r"nccl|rccl|hccl|nvshmem|allreduce|all_reduce|allgather|all_gather|"
    r"reducescatter|reduce_scatter|sendrecv|alltoall|all_to_all|" + EXPERT_PARALLEL,
    re.IGNORECASE,
)
_NORM = re.compile(r"norm|softmax|bn_fw|bn_bw|cudnn::bn|welford", re.IGNORECASE)
_MATMUL = re.compile(
    r"gemm|gemv|cutlass|cublas|xmma|nvjet|cijk_|mfma|wmma|hmma|conv|wgrad|dgrad|fprop|winograd|implicit|"
    r"flash|fmha|attention|attn|matmul|bmm|sm\d\d_|ampere_|volta_|turing_|hopper_|scudnn|dot_kernel",
    re.IGNORECASE,
)
_ELEMENTWISE = re.compile(
    r"elementwise|vectorized|unrolled|reduce|pointwise|triton|index|gather|scatter|embedding|copy|cat|fill|"
    r"where|cast|pool|dropout|relu|gelu|silu|sigmoid|tanh|add|mul|div|sub|foreach|multi_tensor|adam|sgd|"
    r"transpose|permute|upsample|loss|arange|clamp|masked|sort|topk|cumsum|exp|log|pow|sqrt",
    re.IGNORECASE,
)
#: Markers of Tensor Core / reduced-precision GEMM kernels (NVIDIA and AMD spellings).
LOW_PRECISION_KERNEL = re.compile(
    r"h884|h1688|h16816|s1688|s16816|i8816|hmma|bf16|f16|fp16|half|tf32|tensorop|fp8|e4m3|e5m2|bfloat16|float16|"
    r"float8|"
    r"_hsh_|_bsh_|_hh_|hgemm|bgemm|mfma_f16|mfma_bf16|xmma_gemm_f16|_f16f16|_bf16bf16|"
    # AMD Tensile/hipBLASLt: ``Cijk_<A layout>_<B layout>_<types>``; the type token is case-sensitive
    # (``S``/``D`` fp32/fp64 stay fp32: ``SB`` is single with beta). H half, B bf16, F8/B8 fp8, I8 int8;
    # hipBLASLt spells in/out/compute types (``HHS``, ``BBS``, ``HSS``, ``BSS``) and a ``_BH`` suffix.
    r"(?-i:Cijk_A[a-z]+_B[a-z]+_(?:HHS|BBS|HSS|BSS|H|B|F8B8|B8F8|F8|B8|I8)(?:B|S|I)?(?:_|$))",
    re.IGNORECASE,
)
#: Host-side collectives (ops and annotations). ``broadcast`` only through its ``c10d::``/``gloo``/``nccl:`` prefix:
#: ``aten::broadcast_tensors`` is shape arithmetic, not communication.
COMM_OP = re.compile(
    r"gloo|nccl:|c10d::|record_param_comms|all_reduce|allreduce|all_gather|"
    r"reduce_scatter|barrier|alltoall|send|recv",
    re.IGNORECASE,
)
MATMUL_OP = re.compile(
    r"^aten::(mm|addmm|bmm|matmul|linear|conv\w*|_convolution|mkldnn_\w*conv\w*|"
    r"_scaled_dot_product\w*|baddbmm|addmv|mv|einsum)$|mkldnn_matmul|mkldnn_linear"
)
#: Host spans of code torch.compile produced: dynamo's region annotation, AOTAutograd's autograd function,
#: Inductor's compiled graph call.
COMPILED_REGION = re.compile(
    r"Torch-Compiled Region|CompiledFunction|CompiledFxGraph", re.IGNORECASE
)
#: Kernels Inductor (or a user) wrote in Triton: ``triton_poi_fused_add_0``, ``triton_red_…``, ``triton__0d1d``.
TRITON_KERNEL = re.compile(r"^triton_", re.IGNORECASE)
#: Collective families, by kernel or host-op name: what a collective *is* decides which advice can touch it.
ALL_TO_ALL = re.compile(
    r"all_?to_?all|sendrecv|send_?recv|(?<![a-z])(send|recv)(?![a-z])|" + EXPERT_PARALLEL,
    re.IGNORECASE,
)
SHARDED = re.compile(
    r"all_?gather|reduce_?scatter|_allgather_base|_reduce_scatter_base", re.IGNORECASE
)
ALL_REDUCE = re.compile(r"all_?reduce", re.IGNORECASE)
COLLECTIVE_KINDS = ("all_reduce", "all_to_all", "sharded", "other")
DATALOADER = re.compile(r"DataLoader|dataloader\.py|DataLoaderIter", re.IGNORECASE)
DATA_PHASE = re.compile(
    r"data_?load|training_batch|next_batch|get_batch|fetch_batch|load_batch|input_pipeline",
    re.IGNORECASE,
)
OPTIMIZER_PHASE = re.compile(r"optimi[sz]er|zero_grad", re.IGNORECASE)
FORWARD_PHASE = re.compile(r"forward", re.IGNORECASE)
BACKWARD = re.compile(r"backward|autograd::engine", re.IGNORECASE)
#: The agent's annotation around an optimizer closure (``stepwise_agent.inject.closure.CLOSURE_MARK``): the forward
#: and backward that LBFGS or Lightning run inside ``optimizer.step(closure)``, not the optimizer's own time.
CLOSURE = re.compile(r"^stepwise::optimizer_closure$")
OPTIMIZER_STEP = re.compile(
    r"^Optimizer\.step#(\w+)\.step$"
)  # torch.optim's span; the group is the class
OPTIMIZER = re.compile(
    r"^Optimizer\.|optimizer\.py|^## optimizer|^aten::_foreach_|^aten::_fused_(adam|sgd)",
    re.IGNORECASE,
)


def matcher(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    """``pattern.search(name)`` as a yes/no, ~8x faster for a case-insensitive pattern written in lower case
    (no capitals, so no ``\\S``-like escapes either) on an ASCII name: the name lowered once and searched by the
    case-sensitive twin (Python's IGNORECASE matching is slow on long templated kernel names: ~50 us each). Any
    other name or pattern is searched as given, so the answer is always the pattern's own."""
    hit = _MATCHERS.get(pattern)
    if hit is None:
        if pattern.flags & re.IGNORECASE and pattern.pattern == pattern.pattern.lower():
            twin = re.compile(pattern.pattern, pattern.flags & ~re.IGNORECASE)

            def hit(name: str) -> bool:
                return (
                    twin.search(name.lower()) if name.isascii() else pattern.search(name)
                ) is not None
        else:

            def hit(name: str) -> bool:
                return pattern.search(name) is not None

        _MATCHERS[pattern] = hit
    return hit


_MATCHERS: dict[re.Pattern[str], Callable[[str], bool]] = {}


def classify_kernel(name: str) -> str:
    """The class of one GPU kernel from its name (memcpy/memset are ``memory`` by kind, not by name)."""
    if matcher(COMM_KERNEL)(name):
        return "communication"
    if matcher(_NORM)(name):
        return "normalization"
    if matcher(_MATMUL)(name):
        return "matmul"
    if matcher(_ELEMENTWISE)(name):
        return "elementwise"
    return "other"


def collective_kind(name: str) -> str:
    """The family of one collective kernel or op: ``all_to_all`` (all-to-all, send/recv), ``sharded``
    (all-gather, reduce-scatter: FSDP/ZeRO), ``all_reduce``, else ``other`` (broadcast, barrier, unnamed)."""
    if ALL_TO_ALL.search(name):
        return "all_to_all"
    if SHARDED.search(name):
        return "sharded"
    if ALL_REDUCE.search(name):
        return "all_reduce"
    return "other"


def classify_categories(names: pd.Index, fn) -> np.ndarray:
    """Apply a name classifier once per distinct name (the categorical categories), return per-category."""
    return np.array([fn(str(n)) for n in names], dtype=object)


def name_mask(names: pd.Index, pattern: re.Pattern[str]) -> np.ndarray:
    """Boolean per category: does the name match ``pattern``?"""
    match = matcher(pattern)
    return np.fromiter((match(str(n)) for n in names), dtype=bool, count=len(names))


# The module's own patterns' matchers, made here at import (the command line imports while its parse workers read,
# so compiling now is off the critical path; compiling on first use came after the parse).
for _pattern in [v for v in list(globals().values()) if isinstance(v, re.Pattern)]:
    matcher(_pattern)
del _pattern
