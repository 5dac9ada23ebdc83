"""The synthetic Kineto trace of the benchmark: :func:`generate_kineto_trace` and what it reports having written.

The file is one rank of a PyTorch Profiler trace (header, host events, device activity, metadata, footer),
generated deterministically and streamed to disk; the events come from :mod:`trace_parse_kineto_model`.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from trace_parse_common import MiB
from trace_parse_kineto_format import (
    BWD_TID,
    COMPUTE_STREAM,
    GPU_PID,
    HOST_PID,
    MAIN_TID,
    NCCL_STREAM,
)
from trace_parse_kineto_model import TraceWriter


@dataclass
class GenInfo:
    """What :func:`generate_kineto_trace` wrote: exact counts a reader must reproduce."""

    path: str
    bytes: int
    steps: (
        int  # ProfilerStep#N spans on the host (each also mirrored once as a gpu_user_annotation)
    )
    complete_events: int  # every "ph": "X" event, of any category
    cpu_ops: int
    user_annotations: int
    runtime: int
    kernels: int
    nccl_kernels: int
    memcpy: int
    memset: int
    gpu_annotations: int
    memory_events: int  # "[memory]" instants
    flow_events: int  # ac2g "s"/"f" pairs count as two
    metadata_events: int
    seconds: float = 0.0


def _header(world_size: int, rank: int) -> str:
    """The opening fields (device properties, distributed info) up to the start of ``traceEvents``."""
    props = ",\n".join(
        '    {\n      "id": %d, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 84929216512,\n'
        '      "computeMajor": 9, "computeMinor": 0,\n      "maxThreadsPerBlock": 1024, '
        '"maxThreadsPerMultiprocessor": 2048,\n      "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, '
        '"warpSize": 32,\n      "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 233472,\n'
        '      "numSms": 132, "sharedMemPerBlockOptin": 232448\n    }' % i
        for i in range(world_size)
    )
    pg = (
        '{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": %d, '
        '"ranks": [%s]}' % (world_size, ", ".join(str(i) for i in range(world_size)))
    )
    return (
        '{\n  "schemaVersion": 1,\n  "deviceProperties": [\n%s\n  ],\n  "cupti_version": 24,\n'
        '  "cuda_runtime_version": 12040,\n  "with_flops": 0,\n  "record_shapes": 1,\n'
        '  "cuda_driver_version": 12080,\n  "profile_memory": 1,\n'
        '  "trace_id": "5B4A2C7E9D1F4E0A8C3B6D5E4F3A2B1C",\n'
        '  "distributedInfo": {"backend": "nccl", "rank": %d, "world_size": %d, "pg_count": 1, '
        '"pg_config": [%s], "nccl_version": "2.21.5"},\n  "traceEvents": [\n'
    ) % (props, rank, world_size, pg)


def _footer(w: TraceWriter, name: str) -> tuple[str, int, int]:
    """Metadata events (process/thread names), the profiler's own span and the closing fields."""
    meta = []
    ts = w.t0 / 1000
    for pid, label, sort in ((HOST_PID, "CPU", HOST_PID), (GPU_PID, "GPU 0", 16777216)):
        meta.append(
            '  {\n    "name": "process_name", "ph": "M", "ts": %.3f, "pid": %d, "tid": 0,\n    "args": {\n'
            '      "name": "python3"\n    }\n  },\n' % (ts, pid)
        )
        meta.append(
            '  {\n    "name": "process_labels", "ph": "M", "ts": %.3f, "pid": %d, "tid": 0,\n    "args": {\n'
            '      "labels": "%s"\n    }\n  },\n' % (ts, pid, label)
        )
        meta.append(
            '  {\n    "name": "process_sort_index", "ph": "M", "ts": %.3f, "pid": %d, "tid": 0,\n'
            '    "args": {\n      "sort_index": %d\n    }\n  },\n' % (ts, pid, sort)
        )
    for pid, tid, label in (
        (HOST_PID, MAIN_TID, "thread %d (python3)" % MAIN_TID),
        (HOST_PID, BWD_TID, "thread %d (pt_autograd_0)" % BWD_TID),
        (GPU_PID, COMPUTE_STREAM, "stream %d " % COMPUTE_STREAM),
        (GPU_PID, NCCL_STREAM, "stream %d  nccl:all_reduce" % NCCL_STREAM),
    ):
        meta.append(
            '  {\n    "name": "thread_name", "ph": "M", "ts": %.3f, "pid": %d, "tid": %d,\n    "args": {\n'
            '      "name": "%s"\n    }\n  },\n' % (ts, pid, tid, label)
        )
    end = max(w.t, *w.gpu.values())
    span = (
        '  {\n    "ph": "X", "cat": "Trace", "ts": %.3f, "dur": %.3f,\n'
        '    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
        '    "args": {\n      "Op count": 0\n    }\n  },\n' % (ts, (end - w.t0) / 1000)
    )
    tail = (
        '  {\n    "name": "Record Window End", "ph": "i", "s": "g",\n    "pid": "", "tid": "", "ts": %.3f\n  }\n'
        '  ],\n  "traceName": "%s",\n  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": 1740000000000000000\n}\n'
        % (end / 1000 + 10, name)
    )
    return "".join(meta) + span + tail, len(meta), 1


def generate_kineto_trace(
    path: str | os.PathLike[str],
    target_bytes: int,
    *,
    seed: int = 0,
    layers: int = 32,
    micro_batches: int = 4,
    world_size: int = 8,
    rank: int = 0,
) -> GenInfo:
    """Write a deterministic Kineto/PyTorch Profiler trace of about ``target_bytes`` (uncompressed JSON).

    One rank of a DDP bf16 transformer training: ``ProfilerStep#N`` spans, a DataLoader span, H2D copies,
    ``layers`` forward layers x ``micro_batches`` (cpu_op trees with record_shapes args, ``[memory]`` events),
    backward on the autograd thread, NCCL all-reduce kernels on their own stream overlapping compute,
    a fused AdamW step and a ``.item()`` sync. Every launch has a ``cuda_runtime`` event, its kernel/copy with
    the same ``correlation`` and an ``ac2g`` flow pair, in Kineto's own layout (one event over a few lines).
    Steps are written until the file reaches ``target_bytes`` (whole steps; at least one). Streams to disk: memory
    stays at one step's text. Same arguments, same bytes.
    """
    path = Path(path)
    t0 = time.perf_counter()
    head = _header(world_size, rank)
    device_tmp = path.with_name(path.name + ".device.part")
    with (
        open(path, "w", encoding="ascii", buffering=8 * MiB) as host,
        open(device_tmp, "w", encoding="ascii", buffering=8 * MiB) as device,
    ):
        host.write(head)
        w = TraceWriter(host, device, seed, layers, micro_batches)
        w.bytes = len(head)
        steps = 0
        while steps == 0 or w.bytes < target_bytes - 4096:
            w.step(steps + 1)
            steps += 1
        tail, n_meta, n_span = _footer(w, path.name)
    with open(path, "ab") as out, open(device_tmp, "rb") as dev:
        shutil.copyfileobj(dev, out, 16 * MiB)
        out.write(tail.encode("ascii"))
    device_tmp.unlink()
    c = w.c
    complete = (
        c["cpu_ops"]
        + c["user_annotations"]
        + c["runtime"]
        + c["kernels"]
        + c["memcpy"]
        + c["memset"]
        + c["gpu_annotations"]
        + n_span
    )
    return GenInfo(
        path=str(path),
        bytes=path.stat().st_size,
        steps=steps,
        complete_events=complete,
        metadata_events=n_meta,
        seconds=time.perf_counter() - t0,
        **c,
    )
