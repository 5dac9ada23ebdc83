"""The sample workloads, by name: ``WORKLOADS`` and ``get_workload``.

Each workload lives in its own module and exposes ``WORKLOAD``. ``get_workload`` also accepts
``"package.module:NAME"`` for a workload defined outside this registry (your own model, or a test's).
"""

from __future__ import annotations

import importlib

from profilers.errors import SpecError
from sample_runs import communication_bound, compute_bound, data_bound, digits, gpt_small, memory_bound, resnet_small
from sample_runs.base import Parts, Size, Workload

__all__ = ["WORKLOADS", "Parts", "Size", "Workload", "get_workload"]

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
    """The registered workload ``name`` (or ``module:ATTR``); a SpecError names the known ones otherwise."""
    if name in WORKLOADS:
        return WORKLOADS[name]
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            found = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as err:
            raise SpecError(f"cannot load workload {name!r}: {err}") from None
        if not isinstance(found, Workload):
            raise SpecError(f"{name!r} is a {type(found).__name__}, not a sample_runs.Workload")
        return found
    raise SpecError(f"unknown workload {name!r}; known workloads: {', '.join(sorted(WORKLOADS))}")
