"""A folder of rank traces with a straggler planted in it, for tests that need a job whose straggler is beyond the
noise (the shared traces have none: see profilers.jobs.straggler). The traces are the many-rank benchmark's
(``benchmarks/jobs/many_ranks_gen.py``): each rank's compute kernels, then an all-reduce that ends on every rank
when the straggler's compute (1.3 times the others') is done, so the other ranks wait on it."""

from __future__ import annotations

from pathlib import Path

from benchmarks.jobs.many_ranks_gen import write_job

RANKS, STRAGGLER, STEPS, KERNELS = 4, 1, 4, 20


def planted_job(folder: Path, ranks: int = RANKS, straggler: int = STRAGGLER) -> Path:
    """``folder`` holding ``ranks`` rank files (``rank{R}.pt.trace.json.gz``) whose rank ``straggler`` is slow."""
    write_job(folder, ranks, straggler, steps=STEPS, kernels=KERNELS)
    return folder
