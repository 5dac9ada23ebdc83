"""A trace whose every name is an attack: kernels, ops, the device, the file name (the run label)."""

from __future__ import annotations

from pathlib import Path

from tests.trace_factory import kernel, step, write, x

SCRIPT = "<script>alert('xss-script')</script>"
IMG = "\"><img src=x onerror=alert('xss-img')>"
NAMES = (
    SCRIPT,
    IMG,
    "</script><script>alert(3)</script>",
    "<!--",
    "]]><svg onload=alert(4)>",
    "{{7*7}}",
    "[link](javascript:alert(5))",
    "\u2028\u2029",
)


def hostile_trace(folder: Path) -> Path:
    """Two ranks of a GPU trace (file names carry the rank) with hostile kernel, op and device names."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in (0, 1):
        events = [step(1, 0, 1000)]
        for i, name in enumerate(NAMES):
            events.append(x(f"aten::{name}", 10 + 100 * i, 50, correlation=i + 1))
            events.append(
                x("cudaLaunchKernel", 20 + 100 * i, 5, cat="cuda_runtime", correlation=i + 1)
            )
            events.append(kernel(f"{name}_kernel", 30 + 100 * i, 60 + rank * 10, correlation=i + 1))
        write(
            folder / f"{IMG}_rank{rank}.json",
            events,
            deviceProperties=[{"id": 0, "name": SCRIPT, "totalGlobalMem": 16 * 1024**3}],
            distributedInfo={"rank": rank, "world_size": 2, "backend": IMG},
        )
    return folder
