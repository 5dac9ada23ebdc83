"""Build small Kineto-style traces by hand, for tests whose answer is known exactly (times in µs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson


def x(
    name: str, ts: float, dur: float, cat: str = "cpu_op", tid: Any = 1, pid: Any = 100, **args: Any
) -> dict:
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        ev["args"] = args
    return ev


def step(n: int, ts: float, dur: float, tid: Any = 1) -> dict:
    return x(f"ProfilerStep#{n}", ts, dur, cat="user_annotation", tid=tid)


def kernel(name: str, ts: float, dur: float, stream: int = 7, correlation: int = -1) -> dict:
    return x(
        name,
        ts,
        dur,
        cat="kernel",
        tid=stream,
        pid=0,
        device=0,
        stream=stream,
        correlation=correlation,
    )


def memory(ts: float, allocated: int, reserved: int, device_type: int = 1) -> dict:
    return {
        "ph": "i",
        "name": "[memory]",
        "pid": 100,
        "tid": 1,
        "ts": ts,
        "s": "t",
        "args": {
            "Device Type": device_type,
            "Device Id": 0,
            "Bytes": 1,
            "Total Allocated": allocated,
            "Total Reserved": reserved,
        },
    }


def write(path: Path, events: list[dict], **top: Any) -> Path:
    path.write_bytes(orjson.dumps({"schemaVersion": 1, **top, "traceEvents": events}))
    return path
