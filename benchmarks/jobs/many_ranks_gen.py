"""Synthetic many-rank jobs for ``benchmarks/jobs/many_ranks.py``: one Kineto trace per rank, a planted straggler.

Each rank runs ``steps`` steps. In a step its CPU thread launches ``kernels`` compute kernels (an ``aten::mm``
operator and a ``cudaLaunchKernel`` per kernel, linked by correlation ids, as Kineto writes them); the GPU runs
them back to back, then an NCCL all-reduce. The all-reduce cannot finish before the slowest rank reaches it: on
every rank it ends at the same moment, ``comm`` after the straggler's compute ends. So the straggler (its compute
``slow`` times longer) waits for nobody, and every other rank's all-reduce kernel is exposed for the straggler's
extra compute: the collectives wait on it. ``distributedInfo`` names each rank.

    python benchmarks/jobs/many_ranks_gen.py OUT_DIR --ranks 64 [--kernels 400] [--steps 5] [--straggler 17]
"""

from __future__ import annotations

import argparse
import gzip
import random
from pathlib import Path

import orjson

GEMM = "ampere_sgemm_128x64_nn"
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def rank_trace(
    rank: int,
    world: int,
    straggler: int,
    steps: int,
    kernels: int,
    slow: float = 1.3,
    kernel_us: float = 150.0,
    comm_us: float = 4000.0,
    seed: int = 0,
) -> dict:
    rng = random.Random(seed * 100_003 + rank)
    ev: list[dict] = []
    corr = 1
    t = 1_000_000.0  # µs, the trace clock
    compute_max = kernels * kernel_us * slow
    for step in range(steps):
        factor = slow if rank == straggler else 1.0 + rng.uniform(0.0, 0.03)
        k_us = kernel_us * factor
        step_us = compute_max + comm_us + 200.0
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{step}",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": step_us,
            }
        )
        cpu, gpu = t + 10.0, t + 30.0
        for _ in range(kernels):
            ev.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": "aten::mm",
                    "pid": 1,
                    "tid": 1,
                    "ts": cpu,
                    "dur": 8.0,
                    "args": {"External id": corr},
                }
            )
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": cpu + 1.0,
                    "dur": 5.0,
                    "args": {"correlation": corr},
                }
            )
            gpu = max(gpu, cpu + 6.0)
            ev.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": GEMM,
                    "pid": 0,
                    "tid": 7,
                    "ts": gpu,
                    "dur": k_us,
                    "args": {"correlation": corr, "device": 0, "stream": 7},
                }
            )
            gpu += k_us
            cpu += 10.0
            corr += 1
        end = t + 30.0 + compute_max + comm_us  # every rank's all-reduce ends together
        ev.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "nccl:all_reduce",
                "pid": 1,
                "tid": 1,
                "ts": cpu,
                "dur": 6.0,
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": cpu + 1,
                "dur": 5.0,
                "args": {"correlation": corr},
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": NCCL,
                "pid": 0,
                "tid": 20,
                "ts": gpu,
                "dur": end - gpu,
                "args": {"correlation": corr, "device": 0, "stream": 20},
            }
        )
        corr += 1
        t += step_us + 50.0
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
        "deviceProperties": [{"id": 0, "name": "Synthetic GPU", "totalGlobalMem": 80 * 1024**3}],
        "traceEvents": ev,
    }


def write_job(
    out: Path, ranks: int, straggler: int, steps: int = 5, kernels: int = 400, seed: int = 0
) -> list[Path]:
    """Write ``ranks`` gzipped rank files into ``out`` (one event per line, as Kineto writes them)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(ranks):
        doc = rank_trace(r, ranks, straggler, steps, kernels, seed=seed)
        events = b",\n".join(orjson.dumps(e) for e in doc.pop("traceEvents"))
        head = orjson.dumps(doc)[:-1] + b', "traceEvents": [\n'
        p = out / f"rank{r}.pt.trace.json.gz"
        p.write_bytes(gzip.compress(head + events + b"\n]}\n", compresslevel=1))
        paths.append(p)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument(
        "--kernels", type=int, default=400, help="compute kernels per step (3 events each)"
    )
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument(
        "--straggler", type=int, default=None, help="the slow rank (default: ranks // 3)"
    )
    a = ap.parse_args()
    write_job(
        a.out, a.ranks, a.ranks // 3 if a.straggler is None else a.straggler, a.steps, a.kernels
    )


if __name__ == "__main__":
    main()
