"""The fix registry: every fix a rule can propose, one module each, and the explicit list :data:`REGISTRY`.

Each module holds one :class:`~advisors.fixes.base.FixSpec` (``FIX``): its text and documentation link, what it
costs, what to try when it is rejected, where it cannot act, whether a run already does it, how it reaches an
unmodified script (injected knobs, the script's own switch, or "change it yourself") and its examples, which
``tests/advisors/fixes/test_registry.py`` runs. Adding a fix is adding one module and one line here. Everything
below is derived from the list: no other table is keyed by fix id.
"""

from __future__ import annotations

from typing import Any, Mapping

from advisors.bounds import Bound, bound_of
from advisors.facts import Facts
from advisors.fixes.base import EFFORT_LEVELS, FixSpec, device_skip
from advisors.fixes.communication import (
    all_to_all_overlap,
    ddp_bucket_size,
    ddp_no_sync,
    ddp_static_graph,
    fsdp_prefetch,
    grad_compression,
)
from advisors.fixes.compute import (
    bf16_autocast,
    channels_last,
    cudnn_benchmark,
    early_stopping,
    foreach_optimizer,
    fp16_autocast,
    fused_optimizer,
    sdpa_attention,
    tf32,
    torch_compile,
)
from advisors.fixes.data import cache_decoded, dataloader_workers, pin_memory, prefetch_pinned
from advisors.fixes.data.workers import (
    WorkerCount,
    WorkerPlan,
    loader_numbers,
    plan_workers,
    with_workers,
    worker_count,
)
from advisors.fixes.host import (
    avoid_syncs,
    cuda_graphs,
    larger_batch,
    passive_waits,
    set_num_threads,
)
from advisors.fixes.memory import (
    activation_checkpointing,
    expandable_segments,
    grad_accumulation,
    grad_accumulation_x4,
)
from advisors.verdict import Fix

__all__ = [
    "ALTERNATIVES",
    "CUDA_ONLY_SETTINGS",
    "EFFORT_LEVELS",
    "FIXES",
    "REGISTRY",
    "FixSpec",
    "WorkerCount",
    "WorkerPlan",
    "already_done",
    "applies",
    "effort",
    "first_fitting",
    "fix_bounds",
    "snippets_here",
    "get_fix",
    "loader_numbers",
    "plan_workers",
    "rest_got_faster",
    "settings_for",
    "spec_of",
    "worker_count",
]

#: Every fix, in the order the catalog lists them.
REGISTRY: tuple[FixSpec, ...] = (
    dataloader_workers.FIX,
    prefetch_pinned.FIX,
    cache_decoded.FIX,
    pin_memory.FIX,
    grad_accumulation.FIX,
    grad_accumulation_x4.FIX,
    activation_checkpointing.FIX,
    expandable_segments.FIX,
    bf16_autocast.FIX,
    fp16_autocast.FIX,
    tf32.FIX,
    torch_compile.FIX,
    channels_last.FIX,
    fused_optimizer.FIX,
    foreach_optimizer.FIX,
    cudnn_benchmark.FIX,
    early_stopping.FIX,
    sdpa_attention.FIX,
    ddp_no_sync.FIX,
    ddp_bucket_size.FIX,
    grad_compression.FIX,
    ddp_static_graph.FIX,
    all_to_all_overlap.FIX,
    fsdp_prefetch.FIX,
    larger_batch.FIX,
    cuda_graphs.FIX,
    set_num_threads.FIX,
    passive_waits.FIX,
    avoid_syncs.FIX,
)
_BY_ID: dict[str, FixSpec] = {s.id: s for s in REGISTRY}
#: fix id -> the advisor's :class:`~advisors.verdict.Fix` value (what findings propose, what ``--json`` holds)
FIXES: dict[str, Fix] = {s.id: s.fix for s in REGISTRY}
#: What to try next, in order, when a fix is rejected: the same bottleneck, another lever.
ALTERNATIVES: Mapping[str, tuple[str, ...]] = {
    s.id: alternatives
    for s in REGISTRY
    if (alternatives := (*s.alternatives, *(t.id for t in REGISTRY if s.id in t.follows)))
}


def spec_of(fix_id: str) -> FixSpec:
    """The registry entry of ``fix_id``."""
    if fix_id not in _BY_ID:
        raise KeyError(f"no fix {fix_id!r}; known: {', '.join(_BY_ID)}")
    return _BY_ID[fix_id]


def get_fix(fix_id: str) -> Fix:
    return spec_of(fix_id).fix


def effort(fix_id: str | None) -> int:
    """The effort level of a fix (index into :data:`EFFORT_LEVELS`); unknown or no fix: the highest."""
    spec = _BY_ID.get(fix_id or "")
    return spec.level if spec is not None else len(EFFORT_LEVELS) - 1


def applies(fix: Fix, device: str, world_size: int) -> str | None:
    """Why ``fix`` cannot act on this device/world size, or ``None`` when it can."""
    return device_skip(fix, device, world_size)


def already_done(fix_id: str | None, f: Facts) -> bool:
    """True when the run already does what ``fix_id`` is about (``None`` and relative fixes never are)."""
    spec = _BY_ID.get(fix_id or "")
    return bool(spec is not None and spec.done is not None and spec.done(f))


def first_fitting(f: Facts, *fix_ids: str) -> str | None:
    """The first of ``fix_ids`` the run does not already do, or ``None`` when it does them all."""
    return next((x for x in fix_ids if not already_done(x, f)), None)


def fix_bounds(f: Facts) -> dict[str, Bound]:
    """The bounds of the fixes whose reach is narrower than a finding's time (each fix's ``bound``)."""
    return {
        s.id: bound_of(s.id, reach)
        for s in REGISTRY
        if s.bound is not None and (reach := s.bound(f)) is not None
    }


def snippets_here(f: Facts) -> dict[str, str]:
    """The snippets written for this run, by fix id: with the run's own worker count
    (:func:`advisors.fixes.data.workers.with_workers`). A fix not listed reads as in :data:`FIXES`."""
    plan = loader_numbers(f)
    out: dict[str, str] = {}
    for fix_id, fix in FIXES.items():
        here = with_workers(fix, plan)
        if here is not fix:
            out[fix_id] = here.snippet
    return out


def rest_got_faster(
    fix_id: str, base_rest_ms: float | None, patched_step_ms: float | None
) -> str | None:
    """Why ``fix_id``'s measured gain beat its bound, when the arms' own steps show it (its ``exceeded_why``)."""
    spec = _BY_ID.get(fix_id)
    return (
        spec.exceeded_why(base_rest_ms, patched_step_ms)
        if spec is not None and spec.exceeded_why
        else None
    )


#: Settings that act on CUDA only: a fix's settings leave them out on a device known not to be CUDA (pinned pages
#: do nothing without a GPU to copy to; torch warns and ignores them).
CUDA_ONLY_SETTINGS = ("pin_memory",)


def settings_for(fix: Fix, device: str | None) -> dict[str, Any]:
    """The settings ``fix`` changes as said for a run on ``device`` (``None``/``auto``: not known): a CUDA-only
    one is left out where the device is known not to be CUDA."""
    cpu = device not in (None, "auto") and not str(device).startswith("cuda")
    return {k: v for k, v in fix.spec_patch.items() if not (cpu and k in CUDA_ONLY_SETTINGS)}
