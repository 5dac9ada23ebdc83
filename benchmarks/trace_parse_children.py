"""What each contender's child process does: one timed load (+ analysis) of one trace, reported as a dict.

The functions here run inside the fresh subprocess that :func:`trace_parse_measure.measure` starts (as
``trace_parse.py --child KIND``), under the project's python or, for HTA, the python of its own venv: this
module imports only the standard library at load time, and each contender's libraries inside its function,
so that import time and the RSS after imports are measured apart from the work. The whole-process
contenders (:data:`PROCESS_KINDS`) are not children of this module: they are the commands
:func:`process_command` names, timed from start to exit.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from typing import Any, Callable


def _self_rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cpu_with_children() -> float:
    """User+system CPU of this process and of its children that have exited (Stepwise's parse workers)."""
    import resource

    return sum(
        u.ru_utime + u.ru_stime
        for u in (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
    )


def _child_stepwise(path: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    from profilers.trace.breakdown import breakdown
    from profilers.trace.load import load_trace
    from profilers.trace.parallel import worker_count

    t1 = time.perf_counter()
    base = _self_rss()
    c1 = _cpu_with_children()
    trace = load_trace(path)
    t2 = time.perf_counter()
    b = breakdown(trace)
    t3 = time.perf_counter()
    c3 = (
        _cpu_with_children()
    )  # the parse workers have exited (and been waited for) by the time the load returns
    return {
        "import_s": t1 - t0,
        "rss_after_import": base,
        "seconds": t3 - t1,
        "cpu_s": c3 - c1,
        "load_s": t2 - t1,
        "parse_workers": worker_count(),
        "breakdown_s": t3 - t2,
        "events": int(len(trace.events)),
        "steps": int(b.n_steps),
        "memory_events": int(len(trace.memory)),
        "ranks": list(trace.ranks),
        "gpu_busy_share": b.gpu_busy_share,
        "shares": b.shares(),
    }


def _read_decompressed(path: str) -> bytes:
    with open(path, "rb") as fh:
        data = fh.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _child_orjson(path: str, gc_off: bool = False) -> dict[str, Any]:
    t0 = time.perf_counter()
    import gc

    import orjson

    t1 = time.perf_counter()
    base = _self_rss()
    data = _read_decompressed(path)
    if gc_off:  # what Stepwise's loader does too: millions of acyclic dicts only feed the cyclic GC
        gc.disable()
    c2 = time.process_time()
    t2 = time.perf_counter()
    doc = orjson.loads(data)
    t3 = time.perf_counter()
    c3 = time.process_time()
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return {
        "import_s": t1 - t0,
        "rss_after_import": base,
        "seconds": t3 - t2,
        "cpu_s": c3 - c2,
        "read_s": t2 - t1,
        "bytes": len(data),
        "events": len(events),
        "gc": not gc_off,
    }


def _child_hta(trace_dir: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis

    t1 = time.perf_counter()
    base = _self_rss()
    c1 = time.process_time()
    analysis = TraceAnalysis(trace_dir=trace_dir)
    t2 = time.perf_counter()
    bd = analysis.get_temporal_breakdown(visualize=False)
    t3 = time.perf_counter()
    c3 = (
        time.process_time()
    )  # one rank file: HTA parses it in this process (a pool only for several ranks)
    rows = bd.to_dict(orient="records") if hasattr(bd, "to_dict") else []
    events = (
        sum(len(analysis.t.get_trace(r)) for r in analysis.t.get_ranks())
        if hasattr(analysis, "t")
        else None
    )
    return {
        "import_s": t1 - t0,
        "rss_after_import": base,
        "seconds": t3 - t1,
        "cpu_s": c3 - c1,
        "load_s": t2 - t1,
        "breakdown_s": t3 - t2,
        "events": events,
        "temporal_breakdown": rows,
    }


CHILDREN: dict[str, Callable[[str], dict[str, Any]]] = {
    "stepwise": _child_stepwise,
    "orjson": lambda p: _child_orjson(p, gc_off=True),
    "orjson_gc": _child_orjson,
    "hta": _child_hta,
}
# Whole processes, as a user times them (interpreter start, imports, the work, exit): the command line a
# Stepwise user runs, and the smallest script that does HTA's load + temporal breakdown.
HTA_SCRIPT = (
    "import sys\nfrom hta.trace_analysis import TraceAnalysis\n"
    "TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)\n"
)
PROCESS_KINDS = ("stepwise_process", "hta_process")


def process_command(kind: str, python: str, target: str) -> list[str]:
    """The command a whole-process contender runs on ``target`` (a trace file; HTA: a folder of rank files)."""
    if kind == "stepwise_process":
        return [python, "-m", "advisors", "analyze", "--json", target]
    if kind == "hta_process":
        return [python, "-c", HTA_SCRIPT, target]
    raise ValueError(f"not a whole-process contender: {kind}")


def check_analyze_output(stdout: bytes) -> dict[str, Any]:
    """What ``analyze --json`` printed, reduced to a few figures; a ValueError unless it is its JSON document."""
    doc = json.loads(stdout)
    if not isinstance(doc, dict) or "steps" not in doc or "bottleneck" not in doc:
        raise ValueError("no analyze --json document on stdout")
    return {
        "steps": doc["steps"],
        "ranks": doc.get("ranks"),
        "bottleneck": doc["bottleneck"],
        "step_time_ms": doc.get("step_time_ms"),
    }


KINDS = ("stepwise", "stepwise_process", "orjson", "orjson_gc", "hta", "hta_process")  # table order
KIND_TITLES = {
    "stepwise": "Stepwise load+breakdown",
    "stepwise_process": "Stepwise analyze, whole process",
    "orjson": "orjson.loads, gc off",
    "orjson_gc": "orjson.loads, gc on (default)",
    "hta": "HTA TraceAnalysis+temporal bd",
    "hta_process": "HTA load+bd, whole process",
}
