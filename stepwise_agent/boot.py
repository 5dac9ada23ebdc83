"""Boot an unmodified training script under the profiler: ``python -m stepwise_agent.boot RUN_DIR N TARGET…``.

``TARGET`` is ``SCRIPT ARGS…`` or ``-m MODULE ARGS…``; it runs as ``__main__`` with its own ``sys.argv``, in the
user's interpreter (their venv or conda env, their torch): this module imports the standard library and torch
only, and writes plain files that Stepwise's own environment reads (``profilers.run.agent_files``).

Steps are found by :class:`stepwise_agent.steps.StepDetector`. A ``torch.profiler`` schedule (wait W,
warmup 1, active N) advances at each step; every step's wall time (and loss and samples when visible) goes to
``steps.jsonl``, live progress to ``progress.json``. When the active window ends, the trace is exported as
``tb/rank0.<ns>.pt.trace.json.gz``, the script is stopped (``StopTraining`` from the hook), ``agent_result.json``
is written and the process ends with ``os._exit`` so no DataLoader worker or stray thread can hang the exit.

Files, all in ``RUN_DIR``: ``agent.json`` (interpreter, Python, torch version and build, CUDA, the APIs this torch
offers: :mod:`stepwise_agent.capabilities`), ``steps.jsonl``, ``progress.json``, ``injected.json``,
``agent_result.json`` (status, error, warnings, device, peak memory), ``agent_pids.txt`` (one line per rank, for
the runner's memory guard) and ``rank{R}.error.json`` for every rank that raised (its exception and traceback).

An optional ``RUN_DIR/boot.json`` (written by :func:`profilers.run.launch.start_script`) asks for more: ``seed``
(torch, ``random`` and — only when the script's libraries already imported it — numpy, seeded before the script
starts, the same for every arm of an A/B), ``warmup`` + ``measure`` unprofiled steps before the profiler's
window (the measured ones are timed without profiler overhead), ``profile`` active steps, and ``inject``: fix
knobs applied to the script's own objects by :class:`stepwise_agent.inject.Injector`, and ``observe``: knobs the
command itself sets (the script's own flag or config line), whose effect is checked without injecting anything.
How the script is configured (its parsers, config files, globals) goes to ``injected.json``'s ``config``. What the
injector did,
knob by knob, and the user's call sites go to ``injected.json`` — written for every launch, knobs or not (and,
marked ``partial``, at steps 1, 2, 4, 8, …, for a run that is stopped from outside: ``--to-quality``).

Under ``torchrun`` every rank boots this way: each writes its steps (``rank``) and its trace (``rank{R}.…``);
local rank 0 writes progress, ``agent.json``, ``injected.json`` and ``agent_result.json``.

The runner's memory guard (``profilers.run.memory_guard``) asks a run to end its profile early with SIGUSR1: the
step in progress is interrupted (:class:`MemoryGuardStop`), the trace so far exported, and the run ends
``out_of_memory``. Exit codes follow the worker's: 0 ok, 1 failed, 75 out of memory.
"""

from __future__ import annotations

import json
import os
import platform
import random
import runpy
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from stepwise_agent.capabilities import TorchCapabilities, detect
from stepwise_agent.hostinfo import cpu_count, peak_rss_mb
from stepwise_agent.inject import Injector
from stepwise_agent.printed import tap_stdout
from stepwise_agent.steps import StepDetector

EXIT_OK, EXIT_FAILED, EXIT_OUT_OF_MEMORY = 0, 1, 75
PROFILE_WAIT, PROFILE_WARMUP = 1, 1
TRACEBACK_CHARS = 3000
OK, FAILED, OUT_OF_MEMORY, RUNNING = "ok", "failed", "out_of_memory", "running"  # RunStatus values, as text
GUARD_SIGNAL = signal.SIGUSR1
_OOM_TEXT = ("can't allocate memory", "cannot allocate memory", "out of memory")


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON through a temporary file and a rename, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, allow_nan=False, default=str)
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


class MemoryGuardStop(BaseException):
    """Raised in the script's main thread when the runner's memory guard ends the profile early (a
    BaseException, like KeyboardInterrupt, so the script's own ``except Exception`` does not swallow it)."""


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
        self.last_loss: float | None = None
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
        self.last_loss = loss
        self._fh.write(json.dumps(row) + "\n")
        self._fh.flush()
        self.steps_done += 1
        self.prof.step()  # ends the active window (and exports) after the last profiled step
        if self.leader:
            self.write_progress(loss, RUNNING)
        if self.steps_done >= self.total:
            raise StopTraining(EXIT_OK)
        self._t_last = time.perf_counter()  # our own bookkeeping is not the script's step time

    def write_progress(self, loss: float | None, status: str) -> None:
        elapsed = time.time() - self._started
        left = max(self.total - self.steps_done, 0)
        eta = elapsed / self.steps_done * left if self.steps_done else None
        write_json_atomic(self.run_dir / "progress.json", {
            "step": self.steps_done, "total_steps": self.total, "loss": loss, "eta_s": eta,
            "elapsed_s": elapsed, "status": status, "updated_unix": time.time()})

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
    """MemoryError, torch's OutOfMemoryError, or the CPU allocator's "can't allocate memory" RuntimeError."""
    if isinstance(err, (MemoryError, MemoryGuardStop)) or type(err).__name__ == "OutOfMemoryError":
        return True
    return isinstance(err, RuntimeError) and any(t in str(err).lower() for t in _OOM_TEXT)


def _device() -> tuple[str, str]:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return "cuda", torch.cuda.get_device_name()
    return "cpu", platform.processor() or platform.machine()


def agent_facts(caps: TorchCapabilities) -> dict[str, Any]:
    """``agent.json``: what ran the script — interpreter, Python, torch and its build, CUDA, the APIs found."""
    cuda = torch.cuda.is_available()
    return {"interpreter": sys.executable, "python_version": platform.python_version(),
            "torch_version": torch.__version__, "torch_cuda": getattr(torch.version, "cuda", None),
            "cuda_available": cuda, "device_name": torch.cuda.get_device_name(0) if cuda else None,
            "cpu_count": cpu_count(), "pid": os.getpid(), "supported": caps.supported(),
            "capabilities": caps.to_json(), "agent_path": str(Path(__file__).resolve().parent)}


def read_boot_config(run_dir: Path, active: int) -> dict[str, Any]:
    """``boot.json`` (see the module docs) with its defaults: a plain launch waits 1 step, profiles ``active``."""
    raw = read_json(run_dir / "boot.json")
    cfg = raw if isinstance(raw, dict) else {}
    return {"warmup": int(cfg.get("warmup", PROFILE_WAIT)), "measure": int(cfg.get("measure", 0)),
            "profile": int(cfg.get("profile", active)), "seed": cfg.get("seed"),
            "inject": dict(cfg.get("inject") or {}), "observe": dict(cfg.get("observe") or {})}


def seed_everything(seed: int) -> None:
    """The same random streams for every arm: torch (CPU and CUDA), ``random``, and numpy when it is already
    imported (the agent never imports numpy: the user's environment need not have it)."""
    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _guard_stop(signum: int, frame: Any) -> None:
    raise MemoryGuardStop("Stepwise's memory guard ended the profile early")


def script_traceback(exc: BaseException) -> str:
    """The traceback as if the script ran alone: the agent's and runpy's own frames left out."""
    agent_dir = str(Path(__file__).resolve().parent)
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(agent_dir) and "runpy" not in f.filename]
    head = "Traceback (most recent call last):\n" if frames else ""
    return head + "".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(type(exc), exc))


def _write_rank_error(run_dir: Path, rank: int, exc: BaseException, steps_done: int) -> None:
    """``rank{R}.error.json``: this rank's exception, so the runner can show the first one (torchrun keeps none)."""
    write_json_atomic(run_dir / f"rank{rank}.error.json", {
        "rank": rank, "type": type(exc).__name__, "message": str(exc)[:TRACEBACK_CHARS],
        "traceback": script_traceback(exc)[-TRACEBACK_CHARS:],
        "steps_done": steps_done, "t_unix": time.time(), "out_of_memory": _is_oom(exc)})


def main(argv: list[str]) -> int:
    if len(argv) < 3 or (argv[2] == "-m" and len(argv) < 4):
        print("usage: python -m stepwise_agent.boot RUN_DIR N (SCRIPT | -m MODULE) [ARGS...]", file=sys.stderr)
        return 2
    run_dir, active, target = Path(argv[0]), int(argv[1]), argv[2:]
    cfg = read_boot_config(run_dir, active)
    rank, leader = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0")) == 0
    caps = detect(torch)
    if leader:
        write_json_atomic(run_dir / "agent.json", agent_facts(caps))
    with open(run_dir / "agent_pids.txt", "a", encoding="ascii") as fh:
        fh.write(f"{rank} {os.getpid()}\n")
    previous_guard = signal.signal(GUARD_SIGNAL, _guard_stop)
    rec = StepRecorder(run_dir, cfg["profile"], wait=cfg["warmup"] + cfg["measure"], rank=rank, leader=leader)
    detector = StepDetector(rec.on_step)
    injector = Injector(cfg["inject"], on_skipped_step=lambda opt: detector.count_step(opt), caps=caps,
                        observe=cfg["observe"], target=target)

    def before_step() -> None:
        injector.on_step()
        if leader and injector.steps & (injector.steps - 1) == 0:  # steps 1, 2, 4, 8, …: a run stopped from
            write_json_atomic(run_dir / "injected.json", injector.snapshot())  # outside still has its report

    detector.before_step = before_step
    if cfg["seed"] is not None:
        seed_everything(int(cfg["seed"]))
    injector.install()
    detector.install()
    status, error, code, warnings = OK, None, EXIT_OK, []
    stopped: int | None = None
    untap = tap_stdout(run_dir)  # printed lines with their time: a metric the script prints (--to-quality)
    guarded = False
    rec.start()
    try:
        _run_target(target)
    except StopTraining:
        pass
    except SystemExit as exc:  # the script ended itself
        if exc.code not in (None, 0):
            status, code = FAILED, EXIT_FAILED
            error = f"the script exited with {exc.code!r} after {rec.steps_done} step(s)"
    except BaseException as exc:  # noqa: BLE001 - whatever the script raised becomes the run's error
        guarded = isinstance(exc, MemoryGuardStop)
        oom = _is_oom(exc)
        status, code = (OUT_OF_MEMORY, EXIT_OUT_OF_MEMORY) if oom else (FAILED, EXIT_FAILED)
        error = (f"{type(exc).__name__}: {exc}\n" + script_traceback(exc))[-TRACEBACK_CHARS:]
        if not guarded:
            print(script_traceback(exc), file=sys.stderr, end="")  # the script's stderr keeps its traceback
            _write_rank_error(run_dir, rank, exc, rec.steps_done)
    finally:
        signal.signal(GUARD_SIGNAL, previous_guard)
        detector.uninstall()
        injector.uninstall()
        untap()
        rec.stop()
    if guarded:
        warnings.append(f"the memory guard ended the profile early, during step {rec.steps_done}")
    if status == OK and rec.steps_done == 0:
        status, code = FAILED, EXIT_FAILED
        error = "no training step was detected: the script called neither optimizer.step() nor backward()"
    elif status == OK and rec.steps_done < rec.total:
        warnings.append(f"the script ended after {rec.steps_done} step(s), before the {rec.total} requested "
                        f"({rec.wait} before profiling + {PROFILE_WARMUP} profiler warm-up + {cfg['profile']} "
                        "profiled)")
        if rec.steps_done > rec.wait + PROFILE_WARMUP:
            warnings.append(f"the trace's last marker, ProfilerStep#{rec.steps_done}, is the script's ending "
                            "after its last step, not a training step")
    elif status == OK:
        stopped = int(cfg["profile"])
        warnings.append(f"profiled {cfg['profile']} step(s) of the script after {rec.wait + PROFILE_WARMUP}, "
                        f"then stopped it on purpose after step {rec.steps_done}")
    if detector.mode is not None:
        warnings.append(f"steps detected by {detector.mode} calls")
    if not leader:
        return code
    write_json_atomic(run_dir / "injected.json", injector.finish())
    device, device_name = _device()
    write_json_atomic(run_dir / "agent_result.json", {
        "status": status, "error": error, "warnings": warnings, "device": device, "device_name": device_name,
        "world_size": int(os.environ.get("WORLD_SIZE", "1")), "steps_done": rec.steps_done,
        "host_peak_rss_mb": peak_rss_mb(),
        "cuda_peak_mb": torch.cuda.max_memory_allocated() / 1024**2 if device == "cuda" else None,
        "memory_guard": guarded, "profiled_then_stopped": stopped,
        "started_unix": rec._started, "finished_unix": time.time()})
    rec.write_progress(rec.last_loss, status)
    return code


if __name__ == "__main__":
    exit_code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)  # DataLoader workers and the script's threads must not hold the exit
