"""The map half of a many-rank analysis: one rank's trace file → a compact per-step summary (plain types).

A job of N ranks is analysed as map and reduce (:mod:`profilers.jobs.reduce`): each rank file is parsed alone, its
:class:`~profilers.trace.breakdown.Breakdown` computed, and only what the cross-rank views and the advisor need is
kept: per step the categories (ns), device-busy and collective time; kernels and host operators by name (count,
total); the collectives by name with their total and exposed time, and by kind with their message sizes; memory peaks; the counters behind the sync,
host, matmul and FLOP facts; the DataLoader time; the critical path of the rank's median step
(:mod:`profilers.jobs.critical_path`, a few kB), which the reduce reports for the slowest rank. Every field is a sum, a maximum or a count, so the reduce adds
them up to exactly what one breakdown of every rank at once computes (a test holds the two equal on every shared
multi-rank trace). One summary is a few hundred kB for a rank of thousands of kernel names, whatever its trace's
size.

Summaries are cached in Stepwise's own per-user cache (``~/.cache/stepwise/rank-summaries``, or under
``$STEPWISE_SUMMARY_CACHE``, or not at all with ``=off`` or where it cannot be written), named by a hash of the
file's *content* and of :data:`VERSION`: a second ``analyze`` of the same job reads them in a fraction of a
second per rank, a changed or renamed file is never mistaken for another, and the folder of traces is never
written to (reading a job on read-only or shared storage leaves it exactly as it was).

Runs in a worker (a forked process or a Ray task): imports the trace engine, returns plain types only.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path
from typing import Any

import orjson

VERSION = (
    6  # bump when a summary's fields or their meaning change: old cache entries are then ignored
)
CACHE_ENV = "STEPWISE_SUMMARY_CACHE"  # a folder for the cache, or "off"
SUFFIX = ".rank-summary.gz"  # gzip of JSON, named so that no trace reader takes it for a trace


def content_key(path: Path, order: int = 0) -> str:
    """A hash of the file's bytes (BLAKE2b, 1 MiB reads: ~0.5 s per GB), of the summary version and of what the
    rank may be read from besides the bytes (the file's name, its place in the job)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"stepwise-rank-summary-v{VERSION}\0{path.name}\0{order}\0".encode())
    with open(path, "rb") as fh:
        while block := fh.read(1024 * 1024):
            h.update(block)
    return h.hexdigest()


def cache_dir() -> Path | None:
    """Where summaries are cached: ``$STEPWISE_SUMMARY_CACHE`` (``off``: nowhere), else the user's own cache folder
    (as for calibrations, :func:`profilers.efficiency.calibrate.cache_dir`). Never beside the traces: the key is
    the content, so one cache serves every folder that holds the same bytes."""
    env = os.environ.get(CACHE_ENV)
    if env == "off":
        return None
    return Path(env) if env else Path.home() / ".cache" / "stepwise" / "rank-summaries"


def read_cached(folder: Path | None, key: str) -> dict[str, Any] | None:
    if folder is None:
        return None
    try:
        data = orjson.loads(gzip.decompress((folder / (key + SUFFIX)).read_bytes()))
    except (OSError, ValueError, EOFError):
        return None
    return data if isinstance(data, dict) and data.get("version") == VERSION else None


def write_cached(folder: Path | None, key: str, summary: dict[str, Any]) -> bool:
    """Write atomically (a temporary name, then rename); False where the folder cannot be written."""
    if folder is None:
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{key}.{os.getpid()}.tmp"
        tmp.write_bytes(gzip.compress(orjson.dumps(summary), compresslevel=5))
        os.replace(tmp, folder / (key + SUFFIX))
        return True
    except OSError:
        return False


def summarise_path(path: str, order: int, use_cache: bool = True) -> dict[str, Any]:
    """The summary of the rank file at ``path`` (``order``: its place in the job's sorted file list), from the cache
    when it holds one for these bytes. The entry point of every engine's map task."""
    from profilers.trace.sources import find_trace_files

    p = Path(path)
    folder = cache_dir() if use_cache else None
    key = content_key(p, order) if folder is not None else ""
    cached = read_cached(folder, key) if folder is not None else None
    if cached is not None:
        cached["cached"] = True
        return cached
    files = find_trace_files(p)
    summary = summarise_file(files[0], order)
    summary["cached"] = False
    if folder is not None:
        summary["cache_written"] = write_cached(folder, key, {**summary, "cached": False})
    return summary


def summarise_file(f: Any, order: int) -> dict[str, Any]:
    """Parse one rank file (in this process: the map already runs one file per worker) and summarise it."""
    os.environ["STEPWISE_PARSE_WORKERS"] = "0"
    from profilers.trace.breakdown import breakdown
    from profilers.trace.load import load_trace_files

    trace = load_trace_files([f], f.name, first_order=order)
    return summarise_trace(trace, breakdown(trace), f.name, f.rank_hint, order)


def summarise_trace(trace: Any, b: Any, name: str, hint: int | None, order: int) -> dict[str, Any]:
    """The summary of a one-rank :class:`Trace` and its breakdown ``b``."""
    import numpy as np

    from profilers.trace import breakdown_parts as parts
    from profilers.jobs.collectives import collective_rows, collective_sizes, loader_spans
    from profilers.layers import MODULE_EVENT

    ev = trace.events
    in_step = ev["step"].to_numpy() >= 0
    kernel = (ev["kind"] == "kernel").to_numpy() & in_step
    durs = ev.loc[kernel, "dur_ns"].to_numpy(np.int64)
    values, counts = np.unique(durs, return_counts=True)
    runtime = (ev["kind"] == "runtime").to_numpy() & in_step
    names = ev["name"].astype(str)
    n_rows = max(len(b.per_step), 1)
    launch = runtime & names.str.contains("Launch", case=False, regex=False).to_numpy()
    optim = parts.optimizer_counts(ev, in_step)
    flops = b.flops
    loader_ns, loader_names = loader_spans(trace)
    return {
        "version": VERSION,
        "file": name,
        "rank_hint": hint,
        "order": order,
        "rank": int(trace.ranks[0]),
        "device": b.device,
        "devices": [[d.index, d.name, d.total_memory_bytes] for d in trace.devices],
        "has_gpu": bool(trace.has_gpu),
        "accelerator": trace.accelerator,
        "cuda_runtime": trace.cuda_runtime,
        "steps_inferred": bool(b.steps_inferred),
        "warnings": list(trace.warnings),
        "per_step": {
            c: b.per_step[c].astype(np.int64).tolist() for c in b.per_step.columns if c != "rank"
        },
        "gpu_busy_ns": int(b.gpu_busy_ns),
        "comm_total_ns": int(b.comm_total_ns),
        "comm_overlapped_ns": int(b.comm_overlapped_ns),
        "kernels": [
            [str(r.name), str(r.kclass), int(r.count), int(r.total_ns), bool(r.low_precision)]
            for r in b.kernels.itertuples(index=False)
        ],
        "ops": [
            [str(r.name), int(r.count), int(r.total_ns)] for r in b.ops.itertuples(index=False)
        ],
        "kernel_class_ns": {k: int(v) for k, v in b.kernel_class_ns.items()},
        "syncs": {
            k: float(getattr(b.syncs, k)) * n_rows
            for k in ("stream_sync", "device_sync", "event_sync", "item", "malloc_free")
        }
        | {"pageable_copy_ns": b.syncs.pageable_copy_ns, "pinned_copy_ns": b.syncs.pinned_copy_ns},
        "memory": [
            b.memory.device_allocated_bytes,
            b.memory.device_reserved_bytes,
            b.memory.host_allocated_bytes,
        ],
        "kernel_durations": [values.tolist(), counts.tolist()],
        "launch_ns": int(ev.loc[launch, "dur_ns"].sum()),
        "cpu_matmul": [
            b.cpu_matmul.total_ns,
            b.cpu_matmul.fp32_ns,
            b.cpu_matmul.low_precision_ns,
            b.cpu_matmul.unknown_ns,
        ],
        "compiled_spans": int(b.compiled_spans),
        "optimizers": optim,
        "flops": None
        if flops is None
        else {
            "per_step": [[s, v] for (_, s), v in flops.per_step.items()],
            "by_dtype": flops.by_dtype,
            "counts": [flops.with_shapes, flops.without_shapes, flops.unsized],
        },
        "loader": [loader_ns, loader_names],
        "collectives": collective_rows(trace, b.device == "gpu"),
        "collective_sizes": collective_sizes(trace),
        "critical_path": _critical_path(trace),
        "module_events": int(
            ((ev["kind"] == "python_function") & names.str.startswith(MODULE_EVENT)).sum()
        ),
    }


def _critical_path(trace: Any) -> dict[str, Any] | None:
    """The rank's critical path of its median step (:mod:`profilers.jobs.critical_path`), as plain types."""
    from profilers.jobs.critical_path import critical_path

    cp = critical_path(trace)
    return None if cp is None else cp.to_json()


def summary_bytes(summary: dict[str, Any]) -> int:
    """The size of a summary as cached (gzip of its JSON)."""
    return len(gzip.compress(orjson.dumps(summary), compresslevel=5))
