"""A stored run written by hand (steps, telemetry, result, a trace), so pages are tested without training."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from profilers.run_model import RunRecord, RunResult, RunStatus
from profilers.store import RunStore
from tests.trace_factory import step, write, x


def fake_run(store: RunStore, label: str = "fake data_bound", steps: int = 8, status: RunStatus = RunStatus.OK,
             trace: Path | None = None, loss0: float = 2.3, step_ms: float = 50.0) -> RunRecord:
    """A finished run of ``data_bound``: ``steps`` steps of ``step_ms``, host telemetry at 10 Hz, a trace in tb/."""
    spec = {"workload": "data_bound", "params": {"size": "tiny"}, "batch_size": 16, "steps": steps}
    record = store.create("run", label, spec)
    run_dir = Path(record.run_dir)
    t0 = time.time_ns() - int(steps * step_ms * 1e6) - 10**9
    with open(run_dir / "steps.jsonl", "w") as fh:
        for i in range(steps):
            end = t0 + int((i + 1) * step_ms * 1e6)
            fh.write(json.dumps({"rank": 0, "step": i, "wall_ms": step_ms + i % 3, "loss": loss0 / (1 + i),
                                 "samples": 16, "profiled": 2 <= i < 5, "t_unix_ns": end}) + "\n")
    with open(run_dir / "telemetry.jsonl", "w") as fh:
        for j in range(int(steps * step_ms / 100) + 2):
            fh.write(json.dumps({"t_unix_ns": t0 + j * 10**8, "t_trace_us": 0.0, "source": "host",
                                 "cpu_pct": 90.0 + j % 10, "rss_mb": 300.0 + j, "read_mb_s": 0.0,
                                 "write_mb_s": 0.0}) + "\n")
    tb = run_dir / "tb"
    tb.mkdir()
    if trace is not None:
        shutil.copy(trace, tb / "rank0.1.pt.trace.json.gz")
    else:
        events = []
        for i in range(3):
            base = i * 50_000.0
            events += [step(i, base, 50_000), x("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                                                base + 10, 30_000), x("aten::conv2d", base + 30_100, 15_000)]
        write(tb / "rank0.1.pt.trace.json", events)
    result = RunResult(status=status, steps_done=steps, step_time_ms=step_ms + 1, step_time_iqr_ms=1.0,
                       samples_per_s=16 / step_ms * 1000, peak_memory_mb=320.0, final_loss=loss0 / steps,
                       device="cpu", world_size=1, telemetry_source="host",
                       telemetry_note="NVML unavailable: test; host telemetry via psutil")
    return store.finish(record.run_id, result)
