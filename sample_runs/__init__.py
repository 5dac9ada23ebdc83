"""The sample workloads, by name (``WORKLOADS``, ``get_workload``); ``python -m sample_runs.train NAME`` trains one.

Each workload lives in its own module and exposes ``WORKLOAD``. ``get_workload`` also accepts
``"package.module:NAME"`` for a workload defined outside this registry (your own model, or a test's).

The package is an ordinary training project, on its own: it imports torch and its data libraries, never
Stepwise's analysis, and Stepwise launches and instruments ``sample_runs.train`` exactly as it does a user's
script. Every workload honours every flag of that script (``sample_runs.options``) except where a flag has
nothing to act on; the script then warns (Python's ``warnings``, which the run's warnings carry). Per workload:

=====================  ==============================================================================
workload               knobs that cannot act (warned)
=====================  ==============================================================================
data_bound             ``ddp_no_sync``, ``grad_compression`` (one rank unless ``world_size`` > 1)
compute_bound          ``channels_last`` (no 4-D activations), ``cache_decoded`` (samples in memory),
                       ``ddp_no_sync``, ``grad_compression``
memory_bound           ``channels_last``, ``cache_decoded``, ``ddp_no_sync``, ``grad_compression``
communication_bound    ``channels_last``, ``cache_decoded``
resnet_small, digits   ``cache_decoded``, ``ddp_no_sync``, ``grad_compression``
gpt_small              ``channels_last``, ``cache_decoded``, ``ddp_no_sync``, ``grad_compression``
=====================  ==============================================================================

Everywhere: ``tf32``, ``cudnn_benchmark``, ``pin_memory`` and ``cuda_graphs`` act on CUDA only (warned on a
CPU); ``ddp_no_sync`` needs ``grad_accum_steps`` > 1. ``cudnn_benchmark`` tunes convolutions only, so on CUDA
it is warned and ignored for the workloads without convolutions (compute_bound, memory_bound,
communication_bound, gpt_small). ``activation_checkpointing`` acts on every workload (each declares its
checkpoint blocks).
"""

from __future__ import annotations

import importlib

from sample_runs import (
    communication_bound,
    compute_bound,
    data_bound,
    digits,
    gpt_small,
    memory_bound,
    resnet_small,
)
from sample_runs.base import BuildContext, Parts, Size, Workload
from sample_runs.errors import WorkloadError

__all__ = [
    "WORKLOADS",
    "BuildContext",
    "Parts",
    "Size",
    "Workload",
    "WorkloadError",
    "get_workload",
]

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        data_bound.WORKLOAD,
        compute_bound.WORKLOAD,
        memory_bound.WORKLOAD,
        communication_bound.WORKLOAD,
        resnet_small.WORKLOAD,
        gpt_small.WORKLOAD,
        digits.WORKLOAD,
    )
}


def get_workload(name: str) -> Workload:
    """The registered workload ``name`` (or ``module:ATTR``); a WorkloadError names the known ones otherwise."""
    if name in WORKLOADS:
        return WORKLOADS[name]
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            found = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as err:
            raise WorkloadError(f"cannot load workload {name!r}: {err}") from None
        if not isinstance(found, Workload):
            raise WorkloadError(f"{name!r} is a {type(found).__name__}, not a sample_runs.Workload")
        return found
    raise WorkloadError(
        f"unknown workload {name!r}; known workloads: {', '.join(sorted(WORKLOADS))}"
    )
