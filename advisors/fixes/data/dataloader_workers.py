"""DataLoader worker processes: decode and collate off the training process, prefetching ahead."""

from __future__ import annotations

from dataclasses import replace

from advisors.fit import workers_on
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

ARGPARSE_WORKERS = """import argparse
from torch.utils.data import DataLoader
parser = argparse.ArgumentParser()
parser.add_argument("-j", "--workers", type=int, default=0)
args = parser.parse_args()
loader = DataLoader(list(range(8)), num_workers=args.workers)
"""

FIX = FixSpec(
    id="dataloader_workers",
    title="DataLoader worker processes",
    bottleneck=Bottleneck.DATA,
    applies_to="any",
    explanation="Decode and collate in worker processes that prefetch ahead, so loading overlaps the step.",
    snippet=LOADER_CODE + f"                    {WORKERS_CODE}, {PIN_CODE},\n"
    "                    persistent_workers=True, prefetch_factor=4)",
    docs=DOCS,
    effort="keyword",
    settings={
        "num_workers": WorkerCount(),
        "pin_memory": True,
        "persistent_workers": True,
        "prefetch_factor": 4,
    },
    alternatives=("cache_decoded", "prefetch_pinned"),
    injection=Injection(lambda ctx: worker_knobs(ctx, {}), "num_workers", "dataloader"),
    done=workers_on,
    bound=batch_drawing,
    exceeded_why=rest_got_faster,
    examples=(
        FixExample(
            ON_CPU, knobs={"num_workers": 4, "persistent_workers": True, "prefetch_factor": 4}
        ),
        FixExample(
            ON_CUDA,
            knobs={
                "num_workers": 4,
                "persistent_workers": True,
                "prefetch_factor": 4,
                "pin_memory": True,
            },
        ),
        # idle cores while the loader waits: storage latency, more workers than cores
        FixExample(
            replace(ON_CPU, host_busy=0.3),
            knobs={"num_workers": 8, "persistent_workers": True, "prefetch_factor": 4},
        ),
        FixExample(
            replace(ON_CPU, host_busy=0.95, loader={"num_workers": 2}), knobs={}
        ),  # saturated: none
        FixExample(
            replace(ON_CPU, loader={"num_workers": 1}),
            script=ARGPARSE_WORKERS,
            argv=("--workers", "1"),
            changed=("--workers", "2"),
        ),
    ),
)
