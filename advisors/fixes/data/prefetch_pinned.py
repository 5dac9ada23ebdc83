"""Persistent workers, deeper prefetch and pinned memory: the workers fix with pinned batches on a GPU."""

from __future__ import annotations

from advisors.fit import spec_says
from advisors.fixes.base import ON_CPU, ON_CUDA, FixExample, FixSpec, Injection
from advisors.fixes.data.drawing import batch_drawing, rest_got_faster
from advisors.fixes.data.workers import (
    DOCS,
    LOADER_CODE,
    PIN_CODE,
    WORKERS_CODE,
    WorkerCount,
    worker_knobs,
)
from advisors.verdict import Bottleneck

FIX = FixSpec(
    id="prefetch_pinned",
    title="Persistent workers, deeper prefetch, pinned memory",
    bottleneck=Bottleneck.DATA,
    applies_to="any",
    explanation="Keep workers alive across epochs and queue more batches ahead; pinned batches copy asynchronously.",
    snippet=LOADER_CODE + f"                    {WORKERS_CODE}, persistent_workers=True,\n"
    f"                    prefetch_factor=4, {PIN_CODE})\n"
    "x = x.to(device, non_blocking=True)",
    docs=DOCS,
    effort="keyword",
    settings={
        "num_workers": WorkerCount(),
        "persistent_workers": True,
        "prefetch_factor": 4,
        "pin_memory": True,
    },
    alternatives=("cache_decoded",),
    # pinned memory is this fix's own lever; without CUDA it would repeat dataloader_workers exactly
    injection=Injection(
        lambda ctx: worker_knobs(ctx, {"pin_memory": True}) if ctx.device == "cuda" else None,
        "num_workers",
        "dataloader",
    ),
    done=spec_says(
        lambda s: (
            (s.num_workers or 0) > 0
            and s.persistent_workers
            and s.pin_memory
            and (s.prefetch_factor or 2) >= 4
        )
    ),
    bound=batch_drawing,
    exceeded_why=rest_got_faster,
    examples=(
        FixExample(
            ON_CUDA,
            knobs={
                "num_workers": 4,
                "persistent_workers": True,
                "prefetch_factor": 4,
                "pin_memory": True,
            },
        ),
        FixExample(ON_CPU, knobs={}),  # nothing beyond dataloader_workers without a GPU to pin for
    ),
)
