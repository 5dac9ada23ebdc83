"""A stored run written by hand (steps, telemetry, result, a trace), so pages are tested without training."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from profilers.run.records import RunRecord, RunResult, RunStatus
from profilers.store.runs import RunStore
from tests.trace_factory import step, write, x


def fake_run(
    store: RunStore,
    label: str = "fake data_bound",
    steps: int = 8,
    status: RunStatus = RunStatus.OK,
    trace: Path | None = None,
    loss0: float = 2.3,
    step_ms: float = 50.0,
    kind: str = "run",
    files: dict[str, Any] | None = None,
    events: list[dict] | None = None,
    device: str = "cpu",
) -> RunRecord:
    """A finished run of ``data_bound``: ``steps`` steps of ``step_ms``, host telemetry at 10 Hz, a trace in tb/.
    ``kind="launch"`` stores it as a launched script (no spec; ``files`` such as ``launch.json`` instead);
    ``events`` replace the default trace's events."""
    spec = {"workload": "data_bound", "params": {"size": "tiny"}, "batch_size": 16, "steps": steps}
    record = store.create(kind, label, spec if kind == "run" else None, files=files)
    run_dir = Path(record.run_dir)
    t0 = time.time_ns() - int(steps * step_ms * 1e6) - 10**9
    with open(run_dir / "steps.jsonl", "w") as fh:
        for i in range(steps):
            end = t0 + int((i + 1) * step_ms * 1e6)
            fh.write(
                json.dumps(
                    {
                        "rank": 0,
                        "step": i,
                        "wall_ms": step_ms + i % 3,
                        "loss": loss0 / (1 + i),
                        "samples": 16,
                        "profiled": 2 <= i < 5,
                        "t_unix_ns": end,
                    }
                )
                + "\n"
            )
    with open(run_dir / "telemetry.jsonl", "w") as fh:
        for j in range(int(steps * step_ms / 100) + 2):
            fh.write(
                json.dumps(
                    {
                        "t_unix_ns": t0 + j * 10**8,
                        "t_trace_us": 0.0,
                        "source": "host",
                        "cpu_pct": 90.0 + j % 10,
                        "rss_mb": 300.0 + j,
                        "read_mb_s": 0.0,
                        "write_mb_s": 0.0,
                    }
                )
                + "\n"
            )
    tb = run_dir / "tb"
    tb.mkdir()
    if trace is not None:
        shutil.copy(trace, tb / "rank0.1.pt.trace.json.gz")
    elif events is not None:
        write(tb / "rank0.1.pt.trace.json", events)
    else:
        events = []
        for i in range(3):
            base = i * 50_000.0
            events += [
                step(i, base, 50_000),
                x("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", base + 10, 30_000),
                x("aten::conv2d", base + 30_100, 15_000),
            ]
        write(tb / "rank0.1.pt.trace.json", events)
    result = RunResult(
        status=status,
        steps_done=steps,
        step_time_ms=step_ms + 1,
        step_time_iqr_ms=1.0,
        samples_per_s=16 / step_ms * 1000,
        peak_memory_mb=320.0,
        final_loss=loss0 / steps,
        device=device,
        world_size=1,
        telemetry_source="host",
        telemetry_note="NVML unavailable: test; host telemetry via psutil",
    )
    return store.finish(record.run_id, result)


#: A user's training script (never run here: the trials are faked); its DataLoader call is what a kept
#: DataLoader fix rewrites in the diff. ``{name}`` is the dataset's argument, so a test can make it hostile.
SCRIPT = """import torch
from torch.utils.data import DataLoader

loader = DataLoader({name}, batch_size=16, shuffle=True)
model = torch.nn.Linear(8, 2)
for x, y in loader:
    loss = model(x).sum()
    loss.backward()
"""
LOADER_LINE = 4


def gpu_loader_and_sync_events(steps: int = 3) -> list[dict]:
    """A GPU trace whose steps wait on a single-process DataLoader and then make 60 ``.item()`` syncs: the
    advisor proposes DataLoader workers (injectable) and fewer syncs (the user's own change)."""
    from tests.trace_factory import kernel

    ev: list[dict] = []
    for i in range(steps):
        b = i * 50_000.0
        ev += [
            step(i, b, 50_000),
            x("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", b + 10, 20_000),
        ]
        ev += [x("aten::_local_scalar_dense", b + 20_100 + j * 400, 50) for j in range(60)]
        ev.append(kernel("volta_sgemm_128x64_nn", b + 20_200, 20_000))
    return ev


def sites_of(script: Path) -> dict[str, Any]:
    """``injected.json``'s call sites of :data:`SCRIPT` as the launcher records them."""
    return {
        "dataloader": {
            "file": str(script),
            "line": LOADER_LINE,
            "code": "loader = DataLoader(...)",
            "num_workers": 0,
            "pin_memory": False,
            "persistent_workers": False,
            "prefetch_factor": None,
        },
        "model_call": {
            "file": str(script),
            "line": 7,
            "code": "loss = model(x).sum()",
            "type": "Linear",
        },
    }


def fake_script_run(store: RunStore, folder: Path, dataset: str = "data") -> tuple[RunRecord, Path]:
    """A finished ``launch`` run of ``folder/train.py`` (written here) on CUDA, with its ``launch.json`` and the
    ``injected.json`` of a plain launch (no knobs; the loader's settings and the call sites)."""
    script = folder / "train.py"
    script.write_text(SCRIPT.format(name=dataset))
    launch = {
        "command": ["python", "train.py"],
        "steps": 3,
        "cwd": str(folder),
        "nproc_per_node": 1,
        "nnodes": 1,
    }
    injected = {
        "knobs": {},
        "sites": sites_of(script),
        "loader": {
            "num_workers": 0,
            "pin_memory": False,
            "persistent_workers": False,
            "prefetch_factor": None,
            "batch_size": 16,
        },
    }
    record = fake_run(
        store,
        label="train.py",
        kind="launch",
        events=gpu_loader_and_sync_events(),
        device="cuda",
        files={"launch.json": launch, "injected.json": injected},
    )
    return record, script


def fake_script_runner(
    record: RunRecord, script: Path, acted: bool = True, why: str = "the script built no DataLoader"
):
    """A ``script_runner`` stand-in: a run with ``num_workers`` injected takes half the time; each run reports
    its knobs as acted (or not, with ``why``) and points at ``record``'s folder for its trace."""
    from advisors.stats import Trial
    from advisors.experiments.trials import RunOutcome

    calls: list = []

    def runner(store=None, timeout_s=None, experiment=None):
        def run(spec, on_progress=None):
            calls.append(spec)
            if on_progress:
                on_progress({"step": 5, "total_steps": 10})
            fast = "num_workers" in spec.inject
            walls = tuple((50.0 if fast else 100.0) + i % 3 for i in range(8))
            knobs = {
                k: {
                    "value": v,
                    "acted": acted,
                    "evidence": ["seen"] if acted else [],
                    "why": None if acted else why,
                }
                for k, v in spec.inject.items()
            }
            applied = {"knobs": knobs, "sites": sites_of(script), "loader": {"num_workers": 0}}
            return RunOutcome(
                status="ok",
                trial=Trial(walls_ms=walls, samples_per_step=16.0),
                peak_memory_mb=300.0,
                losses=(2.3, 1.9, 1.6, 1.4),
                steps_done=10,
                run_dir=record.run_dir,
                applied=applied,
            )

        return run

    runner.calls = calls  # type: ignore[attr-defined]
    return runner


def fake_capture(store: RunStore, watched: RunRecord) -> RunRecord:
    """A stored capture of the watched run ``watched``: its ``captures/r0c001`` folder (a step-time trigger at step
    3, steps 5–7 profiled) naming a run of its own, which is returned."""
    child = fake_run(store, label=f"{watched.label} · capture 1", kind="launch")
    folder = store.path(watched.run_id) / "captures" / "r0c001"
    folder.mkdir(parents=True)
    (folder / "capture.json").write_text(
        json.dumps(
            {
                "n": 1,
                "rank": 0,
                "steps": [5, 7],
                "status": "done",
                "started_unix": 1.0,
                "trigger": {"kind": "step_time", "step": 3, "reason": "step time +40% for 8 steps"},
            }
        )
    )
    (folder / "stored.json").write_text(json.dumps({"run_id": child.run_id}))
    return child


#: what :func:`memory_apply` stores: 612 → 210 MB of live host tensors, a run peak of 900 → 700 MB,
#: for 120 → 150 ms per step (the terminal's sentence of it is ``MEMORY_SAID``)
MEMORY_SAID = (
    "live host tensors 612 → 210 MB (-66%); run peak 900 → 700 MB; step 120.0 → 150.0 ms (+25%)"
)


def memory_apply(store: RunStore, source: RunRecord, peaks: bool = True) -> Any:
    """A finished Apply of activation checkpointing on ``source``, stored as the dashboard stores
    one, whose record carries each arm's memory peaks (``peaks=False``: none, as an older record);
    its record is returned."""
    from advisors.experiments.results.memory_peaks import MemoryRecord
    from advisors.experiments.results.record import ExperimentRecord
    from advisors.experiments.results.stored_view import apply_view
    from profilers.store import experiments

    said = "kept: the peak of live tensors fell 66% at 0.80× the speed"
    rec = ExperimentRecord(
        kind="apply",
        fix_id="activation_checkpointing",
        fix_title="Activation checkpointing",
        bottleneck="memory",
        outcome="kept",
        outcome_text=said,
        reason=said,
        before_samples_per_s=133.3,
        after_samples_per_s=106.7,
        speedup=0.8,
        low=0.78,
        high=0.82,
        before_step_ms=120.0,
        after_step_ms=150.0,
        trials_per_arm=2,
        spec_change={"activation_checkpointing": True},
        memory=MemoryRecord(612.4, 210.2, 900.0, 700.0, "host tensors") if peaks else None,
    )
    exp = experiments.start(
        store, source.run_id, "apply", "Apply Activation checkpointing", {"fix": rec.fix_id}
    )
    experiments.finish(store, exp.run_id, apply_view(rec, {}))
    return rec
