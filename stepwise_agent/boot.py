"""Boot an unmodified training script under the profiler: ``python -m stepwise_agent.boot RUN_DIR N TARGET…``.

``TARGET`` is ``SCRIPT ARGS…`` or ``-m MODULE ARGS…``; it runs as ``__main__`` with its own ``sys.argv``.
Steps are found by :class:`stepwise_agent.steps.StepDetector`. A ``torch.profiler`` schedule (wait W,
warmup 1, active N) advances at each step; every step's wall time (and loss and samples when visible) goes to
``steps.jsonl``, live progress to ``progress.json``. When the active window ends, the trace is exported as
``tb/rank0.<ns>.pt.trace.json.gz``, the script is stopped (``StopTraining`` from the hook), ``result.json``
is written and the process ends with ``os._exit`` so no DataLoader worker or stray thread can hang the exit.

An optional ``RUN_DIR/boot.json`` (written by :func:`profilers.run.launch.start_script`) asks for more: ``seed``
(torch, numpy and random seeded before the script starts, the same for every arm of an A/B), ``warmup`` +
``measure`` unprofiled steps before the profiler's window (the measured ones are timed without profiler
overhead), ``profile`` active steps, and ``inject``: fix knobs applied to the script's own objects by
:class:`stepwise_agent.inject.Injector`. What the injector did, knob by knob, and the user's call sites (DataLoader,
optimizer, DDP, model) go to ``injected.json`` — written for every launch, knobs or not.

Under ``torchrun`` (``python -m profilers launch --nproc-per-node N``) every rank boots this way: each writes
its steps (``rank``) and its trace (``rank{R}.…``); local rank 0 writes progress, telemetry, ``injected.json``
and ``result.json``.

Exit codes follow the worker's: 0 ok, 1 failed, 75 out of memory (a result is written in each case).
"""

from __future__ import annotations

import json
import os
import platform
import random
import resource
import runpy
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import torch

from stepwise_agent.inject import Injector
from stepwise_agent.printed import tap_stdout
from stepwise_agent.steps import StepDetector
from profilers.run.records import RunResult, RunStatus, summarise_steps
from profilers.store.files import read_json, read_jsonl, steps_frame, telemetry_frame, write_json_atomic

EXIT_OK, EXIT_FAILED, EXIT_OUT_OF_MEMORY = 0, 1, 75
PROFILE_WAIT, PROFILE_WARMUP = 1, 1
TRACEBACK_CHARS = 3000


class StopTraining(SystemExit):
    """Raised from a step hook once the profiled steps are recorded: the script has done its part."""


class StepRecorder:
    """Times steps, drives the profiler schedule, writes steps/progress/trace into ``run_dir``. ``wait`` steps
    run before the profiler's warm-up step and ``active`` profiled steps; ``rank`` names this process's rows."""

    def __init__(self, run_dir: Path, active: int, wait: int = PROFILE_WAIT, rank: int = 0,
                 leader: bool = True) -> None:
        self.run_dir, self.active, self.wait, self.rank, self.leader = run_dir, active, wait, rank, leader
        self.total = wait + PROFILE_WARMUP + active
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.prof = torch.profiler.profile(
            activities=activities, profile_memory=True, record_shapes=True,  # dtypes: is bf16 already on?
            schedule=torch.profiler.schedule(wait=wait, warmup=PROFILE_WARMUP, active=active, repeat=1),
            on_trace_ready=self._export)
        self.traces: list[Path] = []
        self.steps_done = 0
        self._fh = open(run_dir / "steps.jsonl", "a", encoding="utf-8")
        self._started = time.time()
        self._t_last = time.perf_counter()
        self._running = False

    def start(self) -> None:
        self.prof.start()
        self._running = True
        self._t_last = time.perf_counter()

    def on_step(self, loss: float | None, samples: int | None) -> None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()  # the step's kernels belong to the step
        wall_ms = (time.perf_counter() - self._t_last) * 1000.0
        step = self.steps_done
        started_ns = time.time_ns() - int(wall_ms * 1e6)  # a step row's time is its start, as the trainer's
        row = {"rank": self.rank, "step": step, "wall_ms": round(wall_ms, 4), "loss": loss, "samples": samples,
               "profiled": self.wait + PROFILE_WARMUP <= step < self.total, "t_unix_ns": started_ns}
        self._fh.write(json.dumps(row) + "\n")
        self._fh.flush()
        self.steps_done += 1
        self.prof.step()  # ends the active window (and exports) after the last profiled step
        if self.leader:
            self.write_progress(loss, RunStatus.RUNNING)
        if self.steps_done >= self.total:
            raise StopTraining(EXIT_OK)
        self._t_last = time.perf_counter()  # our own bookkeeping is not the script's step time

    def write_progress(self, loss: float | None, status: RunStatus) -> None:
        elapsed = time.time() - self._started
        left = max(self.total - self.steps_done, 0)
        eta = elapsed / self.steps_done * left if self.steps_done else None
        write_json_atomic(self.run_dir / "progress.json", {
            "step": self.steps_done, "total_steps": self.total, "loss": loss, "eta_s": eta,
            "elapsed_s": elapsed, "status": status.value, "updated_unix": time.time()})

    def stop(self) -> None:
        """Stop profiling (exporting a partial window if the script ended early) and close the step log."""
        if self._running:
            self._running = False
            self.prof.stop()
        self._fh.close()

    def _export(self, prof: torch.profiler.profile) -> None:
        tb = self.run_dir / "tb"
        tb.mkdir(exist_ok=True)
        name = f"rank{self.rank}.{time.time_ns()}.pt.trace.json"
        partial = tb / f"{name}.partial.gz"  # not a trace name until complete; .gz makes torch gzip it
        prof.export_chrome_trace(str(partial))
        os.replace(partial, tb / f"{name}.gz")
        self.traces.append(tb / f"{name}.gz")


def _run_target(target: list[str]) -> None:
    if target[0] == "-m":
        sys.argv = [target[1], *target[2:]]
        runpy.run_module(target[1], run_name="__main__", alter_sys=True)
    else:
        script = os.path.abspath(target[0])
        sys.argv = [target[0], *target[1:]]
        sys.path.insert(0, os.path.dirname(script))
        runpy.run_path(script, run_name="__main__")


def _is_oom(err: BaseException) -> bool:
    return isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError"


def _device() -> tuple[str, str]:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return "cuda", torch.cuda.get_device_name()
    return "cpu", platform.processor() or platform.machine()


def _result(rec: StepRecorder, status: RunStatus, error: str | None, warnings: list[str],
            sampler: Any) -> RunResult:
    telemetry = telemetry_frame(read_jsonl(rec.run_dir / "telemetry.jsonl"))
    summary = summarise_steps(steps_frame(read_jsonl(rec.run_dir / "steps.jsonl")), telemetry)
    if summary.peak_memory_mb is None:
        summary = summary.with_peak(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)  # KiB on Linux
    device, device_name = _device()
    if device == "cuda":
        summary = summary.with_peak(torch.cuda.max_memory_allocated() / 1024**2)
    return RunResult(status=status, error=error, device=device, device_name=device_name,
                     world_size=int(os.environ.get("WORLD_SIZE", "1")),
                     telemetry_source=getattr(sampler, "source", None),
                     telemetry_note=getattr(sampler, "note", "telemetry sampler unavailable"),
                     warnings=tuple(warnings), started_unix=rec._started, finished_unix=time.time(),
                     **summary.result_fields())


def _start_sampler(run_dir: Path) -> Any:
    try:
        from profilers.telemetry.sampler import TelemetrySampler
    except ImportError:
        return None
    try:
        sampler = TelemetrySampler(run_dir / "telemetry.jsonl", interval_s=0.1)
        sampler.start()
        return sampler
    except Exception:  # telemetry is a bonus: never the reason a launch fails
        return None


def read_boot_config(run_dir: Path, active: int) -> dict[str, Any]:
    """``boot.json`` (see the module docs) with its defaults: a plain launch waits 1 step, profiles ``active``."""
    raw = read_json(run_dir / "boot.json")
    cfg = raw if isinstance(raw, dict) else {}
    return {"warmup": int(cfg.get("warmup", PROFILE_WAIT)), "measure": int(cfg.get("measure", 0)),
            "profile": int(cfg.get("profile", active)), "seed": cfg.get("seed"),
            "inject": dict(cfg.get("inject") or {})}


def seed_everything(seed: int) -> None:
    """The same random streams for every arm: torch (CPU and CUDA), numpy and ``random``."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def main(argv: list[str]) -> int:
    run_dir, active, target = Path(argv[0]), int(argv[1]), argv[2:]
    if not target or (target[0] == "-m" and len(target) < 2):
        print("usage: python -m stepwise_agent.boot RUN_DIR N (SCRIPT | -m MODULE) [ARGS...]", file=sys.stderr)
        return 2
    cfg = read_boot_config(run_dir, active)
    rank, leader = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0")) == 0
    sampler = _start_sampler(run_dir) if leader else None
    rec = StepRecorder(run_dir, cfg["profile"], wait=cfg["warmup"] + cfg["measure"], rank=rank, leader=leader)
    detector = StepDetector(rec.on_step)
    injector = Injector(cfg["inject"], on_skipped_step=lambda opt: detector.count_step(opt))
    detector.before_step = injector.on_step
    if cfg["seed"] is not None:
        seed_everything(int(cfg["seed"]))
    injector.install()
    detector.install()
    status, error, code, warnings = RunStatus.OK, None, EXIT_OK, []
    stopped: int | None = None
    untap = tap_stdout(run_dir)  # printed lines with their time: a metric the script prints (--to-quality)
    rec.start()
    try:
        _run_target(target)
    except StopTraining:
        pass
    except SystemExit as exc:  # the script ended itself
        if exc.code not in (None, 0):
            status, code = RunStatus.FAILED, EXIT_FAILED
            error = f"the script exited with {exc.code!r} after {rec.steps_done} step(s)"
    except BaseException as exc:  # noqa: BLE001 - whatever the script raised becomes the run's error
        oom = _is_oom(exc)
        status = RunStatus.OUT_OF_MEMORY if oom else RunStatus.FAILED
        code = EXIT_OUT_OF_MEMORY if oom else EXIT_FAILED
        error = (f"{type(exc).__name__}: {exc}\n" + "".join(traceback.format_exc()))[-TRACEBACK_CHARS:]
    finally:
        detector.uninstall()
        injector.uninstall()
        untap()
        rec.stop()
        if sampler is not None:
            sampler.stop()
    if status is RunStatus.OK and rec.steps_done == 0:
        status, code = RunStatus.FAILED, EXIT_FAILED
        error = "no training step was detected: the script called neither optimizer.step() nor backward()"
    elif status is RunStatus.OK and rec.steps_done < rec.total:
        warnings.append(f"the script ended after {rec.steps_done} step(s), before the {rec.total} requested "
                        f"({rec.wait} before profiling + {PROFILE_WARMUP} profiler warm-up + {cfg['profile']} "
                        "profiled)")
        if rec.steps_done > rec.wait + PROFILE_WARMUP:
            warnings.append(f"the trace's last marker, ProfilerStep#{rec.steps_done}, is the script's ending "
                            "after its last step, not a training step")
    elif status is RunStatus.OK:
        stopped = int(cfg["profile"])
        warnings.append(f"profiled {cfg['profile']} step(s) of the script after {rec.wait + PROFILE_WARMUP}, "
                        f"then stopped it on purpose after step {rec.steps_done}")
    if detector.mode is not None:
        warnings.append(f"steps detected by {detector.mode} calls")
    if not leader:
        return code
    write_json_atomic(run_dir / "injected.json", injector.finish())
    result = _result(rec, status, error, warnings, sampler).with_(profiled_then_stopped=stopped)
    write_json_atomic(run_dir / "result.json", result.to_dict())
    rec.write_progress(result.final_loss, status)
    _write_scalars(run_dir)
    return code


def _write_scalars(run_dir: Path) -> None:
    try:
        from profilers.run.tb_export import write_scalars
    except ImportError:
        return
    try:
        write_scalars(run_dir)
    except Exception as err:  # scalars are a convenience; the run is already stored
        print(f"stepwise: TensorBoard scalars not written: {err}", file=sys.stderr)


if __name__ == "__main__":
    exit_code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)  # DataLoader workers and the script's threads must not hold the exit
