"""The normalised event kinds and how Kineto's categories map to them (no pandas: the parse workers use it)."""

from __future__ import annotations

#: Normalised event kinds. Host side first, then device side.
KINDS = (
    "cpu_op",  # aten / framework operators (Kineto "cpu_op", old "Operator")
    "user_annotation",  # record_function ranges (incl. ProfilerStep#N)
    "python_function",  # Python stack events (with_stack=True)
    "runtime",  # CUDA/HIP runtime and driver API calls ("cuda_runtime", "cuda_driver", "Runtime")
    "kernel",  # GPU kernels
    "memcpy",  # GPU memory copies
    "memset",  # GPU memory sets
    "gpu_annotation",  # record_function ranges mirrored on the GPU timeline
    "other",  # anything else with a duration
)
GPU_KINDS = frozenset({"kernel", "memcpy", "memset", "gpu_annotation"})

_CAT_TO_KIND = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "user_annotation",
    "python_function": "python_function",
    "python": "python_function",  # PyTorch 1.8 Kineto traces: Python stack events
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "runtime": "runtime",
    "hip_runtime": "runtime",
    "mtia_runtime": "runtime",  # Kineto's MTIA categories (newer Kinetos write runtime, kernel)
    "kernel": "kernel",
    "mtia_ccp_events": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "gpu_user_annotation": "gpu_annotation",
}


def kind_of(cat: str | None) -> str:
    """Normalise a Kineto category (any schema, any capitalisation, spaces or underscores: ``Operator``,
    ``GPU Memcpy``, ``user_annotation``) to one of :data:`KINDS`."""
    if not cat:
        return "other"
    return _CAT_TO_KIND.get(cat.strip().lower().replace(" ", "_").replace("-", "_"), "other")
