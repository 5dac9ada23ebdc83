"""Boot an unmodified training script under the profiler: ``python -m stepwise_agent.boot RUN_DIR N TARGET…``.

``TARGET`` is ``SCRIPT ARGS…`` or ``-m MODULE ARGS…``; it runs as ``__main__`` with its own ``sys.argv``, in the
user's interpreter (their venv or conda env, their torch): this module imports the standard library and torch
only, and writes plain files that Stepwise's own environment reads (``profilers.run.agent_files``).

Steps are found by :class:`stepwise_agent.steps.StepDetector` and recorded by
:class:`stepwise_agent.recorder.StepRecorder` (step times, the profiler's schedule, the trace, the peaks of the
unprofiled steps and of the profiled window apart). When the active window ends, the script is stopped
(``StopTraining`` from the hook), ``agent_result.json`` is written and the process ends with ``os._exit`` so no
DataLoader worker or stray thread can hang the exit.

Files, all in ``RUN_DIR``: ``agent.json`` (interpreter, Python, torch version and build, CUDA, the APIs this torch
offers: :mod:`stepwise_agent.capabilities`), ``steps.jsonl``, ``progress.json``, ``injected.json``,
``agent_result.json`` (status, error, warnings, device, peak memory), ``agent_pids.txt`` (one line per rank, for
the runner's memory guard) and ``rank{R}.error.json`` for every rank that raised (its exception and traceback).

An optional ``RUN_DIR/boot.json`` (written by :func:`profilers.run.launch.start_script`) asks for more: ``seed``
(torch, ``random`` and — only when the script's libraries already imported it — numpy, seeded before the script
starts, the same for every arm of an A/B; with ``STEPWISE_SEED_OFFSET=k``, to-quality's seed k, the script's own
seeding calls get + k too: :mod:`stepwise_agent.seeding`, recorded in ``seeds.json``), ``warmup`` + ``measure`` unprofiled steps before the profiler's
window (the measured ones are timed without profiler overhead), ``profile`` active steps, and ``inject``: fix
knobs applied to the script's own objects by :class:`stepwise_agent.inject.Injector`, and ``observe``: knobs the
command itself sets (the script's own flag or config line), whose effect is checked without injecting anything.
How the script is configured (its parsers, config files, globals) goes to ``injected.json``'s ``config``. What the
injector did,
knob by knob, and the user's call sites go to ``injected.json`` — written for every launch, knobs or not (and,
marked ``partial``, at steps 1, 2, 4, 8, …, for a run that is stopped from outside: ``--to-quality``).

Under ``torchrun`` every rank boots this way: each writes its steps (``rank``) and its trace (``rank{R}.…``);
local rank 0 writes progress, ``agent.json``, ``injected.json`` and ``agent_result.json``.

The runner's memory guard (``profilers.run.agent_files``) signals SIGUSR1 when memory passes its limit. In the
profiled window the profile is what grows: it is cut there (the trace so far exported, the step finished
unprofiled, the run ends ``ok`` with a warning). Outside it the step in progress is interrupted
(:class:`MemoryGuardStop`) and the run ends ``out_of_memory``. Exit codes follow the worker's: 0 ok, 1 failed,
75 out of memory.
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

from stepwise_agent.user_env import restore as _restore_user_env

_restore_user_env()  # before torch and the script: they see the environment the user launched with

import torch  # noqa: E402

# The agent's own modules (several import torch) likewise load after the restore.
from stepwise_agent import rank_summary  # noqa: E402
from stepwise_agent.capabilities import TorchCapabilities, detect  # noqa: E402
from stepwise_agent.hostinfo import cpu_count, peak_rss_mb  # noqa: E402
from stepwise_agent.inject import Injector  # noqa: E402
from stepwise_agent.noise_scale import install_if_asked as install_noise_meter  # noqa: E402
from stepwise_agent.seeding import install_if_asked as offset_seeds  # noqa: E402
from stepwise_agent.inject.sites import is_user_file  # noqa: E402
from stepwise_agent.printed import tap_stdout, tap_warnings  # noqa: E402
from stepwise_agent.recorder import (  # noqa: E402
    PROFILE_WAIT,
    PROFILE_WARMUP,
    MemoryGuardStop,
    StepRecorder,
    StopTraining,
    write_json_atomic,
)
from stepwise_agent.steps import StepDetector  # noqa: E402
from stepwise_agent.watch import watch_recorder, watch_warnings  # noqa: E402

EXIT_OK, EXIT_FAILED, EXIT_OUT_OF_MEMORY = 0, 1, 75
TRACEBACK_CHARS = 3000
OK, FAILED, OUT_OF_MEMORY, RUNNING = (
    "ok",
    "failed",
    "out_of_memory",
    "running",
)  # RunStatus values, as text
GUARD_SIGNAL = signal.SIGUSR1
_OOM_TEXT = ("can't allocate memory", "cannot allocate memory", "out of memory")


def read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


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
    return {
        "interpreter": sys.executable,
        "python_version": platform.python_version(),
        "torch_version": torch.__version__,
        "torch_cuda": getattr(torch.version, "cuda", None),
        "cuda_available": cuda,
        "device_name": torch.cuda.get_device_name(0) if cuda else None,
        "cpu_count": cpu_count(),
        "pid": os.getpid(),
        "supported": caps.supported(),
        "capabilities": caps.to_json(),
        "agent_path": str(Path(__file__).resolve().parent),
    }


def read_boot_config(run_dir: Path, active: int) -> dict[str, Any]:
    """``boot.json`` (see the module docs) with its defaults: a plain launch waits 1 step, profiles ``active``."""
    raw = read_json(run_dir / "boot.json")
    cfg = raw if isinstance(raw, dict) else {}
    return {
        "warmup": int(cfg.get("warmup", PROFILE_WAIT)),
        "measure": int(cfg.get("measure", 0)),
        "profile": int(cfg.get("profile", active)),
        "seed": cfg.get("seed"),
        "inject": dict(cfg.get("inject") or {}),
        "observe": dict(cfg.get("observe") or {}),
        "trace_ranks": rank_summary.parse_trace_ranks(cfg.get("trace_ranks")),
        "cuda_memory_budget_mb": cfg.get("cuda_memory_budget_mb"),
        "watch": dict(cfg["watch"]) if isinstance(cfg.get("watch"), dict) else None,
    }


def cap_cuda_memory(budget_mb: float) -> list[str]:
    """The run's memory budget on a GPU: the CUDA caching allocator of every device may hold at most
    ``budget_mb`` MiB (past it torch raises its out-of-memory error, and the run ends ``out_of_memory``)."""
    notes = []
    for index in range(torch.cuda.device_count()):
        total_mb = torch.cuda.get_device_properties(index).total_memory / 2**20
        torch.cuda.set_per_process_memory_fraction(min(budget_mb / total_mb, 1.0), index)
        notes.append(
            f"memory budget: the CUDA allocator of GPU {index} capped at {budget_mb:g} of its "
            f"{total_mb:.0f} MiB"
        )
    return notes


def seed_everything(seed: int) -> None:
    """The same random streams for every arm: torch (CPU and CUDA), ``random``, and numpy when it is already
    imported (the agent never imports numpy: the user's environment need not have it)."""
    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _exit_code(code: Any) -> int:
    """The exit status Python gives ``sys.exit(code)``: 0 for None, the number, else 1 (a message)."""
    if code is None:
        return EXIT_OK
    return code if isinstance(code, int) else EXIT_FAILED


def _guard_stop(signum: int, frame: Any) -> None:
    """Before the recorder starts (it takes the signal over: cut or stop, by phase), the guard stops the run."""
    raise MemoryGuardStop("Stepwise's memory guard ended the run")


def script_traceback(exc: BaseException) -> str:
    """The traceback as if the script ran alone: the agent's and runpy's own frames left out."""
    agent_dir = str(Path(__file__).resolve().parent)
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith(agent_dir) and "runpy" not in f.filename
    ]
    head = "Traceback (most recent call last):\n" if frames else ""
    return (
        head
        + "".join(traceback.format_list(frames))
        + "".join(traceback.format_exception_only(type(exc), exc))
    )


def tail_lines(text: str, limit: int = TRACEBACK_CHARS) -> str:
    """The last whole lines of ``text`` that fit in ``limit`` characters (a cut never starts mid-path), with
    how many lines were left out said first."""
    lines = text.splitlines()
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        if kept and size + len(line) + 1 > limit:
            break
        kept.insert(0, line[-limit:])
        size += len(line) + 1
    left = len(lines) - len(kept)
    return "\n".join(
        ([f"({left} earlier line(s) of the traceback left out)"] if left else []) + kept
    )


def _write_rank_error(run_dir: Path, rank: int, exc: BaseException, steps_done: int) -> None:
    """``rank{R}.error.json``: this rank's exception, so the runner can show the first one (torchrun keeps none)."""
    write_json_atomic(
        run_dir / f"rank{rank}.error.json",
        {
            "rank": rank,
            "type": type(exc).__name__,
            "message": str(exc)[:TRACEBACK_CHARS],
            "traceback": tail_lines(script_traceback(exc)),
            "steps_done": steps_done,
            "t_unix": time.time(),
            "out_of_memory": _is_oom(exc),
        },
    )


def main(argv: list[str]) -> int:
    if len(argv) < 3 or (argv[2] == "-m" and len(argv) < 4):
        print(
            "usage: python -m stepwise_agent.boot RUN_DIR N (SCRIPT | -m MODULE) [ARGS...]",
            file=sys.stderr,
        )
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
    watching = cfg["watch"] is not None
    rec: Any = (
        watch_recorder(run_dir, cfg["watch"], cfg["cuda_memory_budget_mb"], rank, leader)
        if watching
        else StepRecorder(
            run_dir,
            cfg["profile"],
            wait=cfg["warmup"] + cfg["measure"],
            rank=rank,
            leader=leader,
            trace_ranks=cfg["trace_ranks"],
        )
    )
    detector = StepDetector(rec.on_step)
    rec.data_ms = lambda: detector.last_data_ms
    if watching:
        rec.backward_ms = lambda: detector.last_backward_ms
    injector = Injector(
        cfg["inject"],
        on_skipped_step=lambda opt: detector.count_step(opt),
        caps=caps,
        observe=cfg["observe"],
        target=target,
    )

    def before_step() -> None:
        injector.on_step()
        if (
            leader and injector.steps & (injector.steps - 1) == 0
        ):  # steps 1, 2, 4, 8, …: a run stopped from
            write_json_atomic(
                run_dir / "injected.json", injector.snapshot()
            )  # outside still has its report

    detector.before_step = before_step
    if cfg["seed"] is not None:
        seed_everything(int(cfg["seed"]))
    seeds = offset_seeds(
        run_dir, leader
    )  # to-quality's seed k: the script's own seeding calls get + k
    budget_notes = (
        cap_cuda_memory(float(cfg["cuda_memory_budget_mb"]))
        if cfg["cuda_memory_budget_mb"] and torch.cuda.is_available()
        else []
    )
    injector.install()
    install_noise_meter(
        run_dir, rank
    )  # the gradient noise scale, when the launcher asked (to-quality)
    detector.install()
    status, error, code, warnings = OK, None, EXIT_OK, []
    script_code = EXIT_OK
    stopped: int | None = None
    untap = tap_stdout(
        run_dir
    )  # printed lines with their time: a metric the script prints (--to-quality)
    said, unwarn = tap_warnings(is_user_file)  # the script's own warnings join the run's
    guarded = False
    rec.start()
    try:
        _run_target(target)
    except StopTraining:
        pass
    except SystemExit as exc:  # the script ended itself
        script_code = _exit_code(exc.code)
        if exc.code not in (None, 0):
            status, code = FAILED, EXIT_FAILED
            error = f"the script exited with {exc.code!r} after {rec.steps_done} step(s)"
    except BaseException as exc:  # noqa: BLE001 - whatever the script raised becomes the run's error
        guarded = isinstance(exc, MemoryGuardStop)
        script_code = -signal.SIGINT if isinstance(exc, KeyboardInterrupt) else EXIT_FAILED
        oom = _is_oom(exc)
        status, code = (OUT_OF_MEMORY, EXIT_OUT_OF_MEMORY) if oom else (FAILED, EXIT_FAILED)
        error = f"{type(exc).__name__}: {str(exc)[:TRACEBACK_CHARS]}\n" + tail_lines(
            script_traceback(exc)
        )
        if not guarded:
            print(
                script_traceback(exc), file=sys.stderr, end=""
            )  # the script's stderr keeps its traceback
            _write_rank_error(run_dir, rank, exc, rec.steps_done)
    finally:
        signal.signal(GUARD_SIGNAL, previous_guard)
        detector.uninstall()
        injector.uninstall()
        if seeds is not None:
            seeds.uninstall()
        untap()
        unwarn()
        rec.stop()
    if guarded:
        warnings.append(f"the memory guard ended the run, during step {rec.steps_done}")
    if watching:
        code = (
            code if guarded else script_code
        )  # watched: the job's own exit code, passed through unchanged
        warnings += watch_warnings(rec)
    elif rec.cut_during_step is not None:
        warnings.append(
            f"the memory guard cut the profile during step {rec.cut_during_step}: the trace holds the "
            f"steps profiled before it and part of step {rec.cut_during_step}"
        )
    if watching:
        pass  # a watched script ends when it ends: no planned window to speak of
    elif status == OK and rec.cut_during_step is not None:
        stopped = rec.steps_done - rec.wait - PROFILE_WARMUP
        warnings.append(
            f"profiled {stopped} step(s) of the script (the last in part), then stopped it on purpose "
            f"after step {rec.steps_done}"
        )
    elif status == OK and rec.steps_done == 0:
        status, code = FAILED, EXIT_FAILED
        error = "no training step was detected: the script called neither optimizer.step() nor backward()"
    elif status == OK and rec.steps_done < rec.total:
        warnings.append(
            f"the script ended after {rec.steps_done} step(s), before the {rec.total} requested "
            f"({rec.wait} before profiling + {PROFILE_WARMUP} profiler warm-up + {cfg['profile']} "
            "profiled)"
        )
        if rec.steps_done > rec.wait + PROFILE_WARMUP:
            warnings.append(
                f"the trace's last marker, ProfilerStep#{rec.steps_done}, is the script's ending "
                "after its last step, not a training step"
            )
    elif status == OK:
        stopped = int(cfg["profile"])
        warnings.append(
            f"profiled {cfg['profile']} step(s) of the script after {rec.wait + PROFILE_WARMUP}, "
            f"then stopped it on purpose after step {rec.steps_done}"
        )
    if detector.mode is not None:
        warnings.append(f"steps detected by {detector.mode} calls")
    warnings += budget_notes + [f"the script warned: {w}" for w in said]
    if not leader:
        return code
    write_json_atomic(run_dir / "injected.json", injector.finish())
    device, device_name = _device()
    write_json_atomic(
        run_dir / "agent_result.json",
        {
            "status": status,
            "error": error,
            "warnings": warnings,
            "device": device,
            "device_name": device_name,
            "world_size": int(os.environ.get("WORLD_SIZE", "1")),
            "node_rank": int(os.environ.get("GROUP_RANK", "0")),
            "steps_done": rec.steps_done,
            "host_peak_rss_mb": peak_rss_mb(),
            "cuda_peak_mb": torch.cuda.max_memory_allocated() / 1024**2
            if device == "cuda"
            else None,
            "memory_guard": guarded,
            "profiled_then_stopped": stopped,
            **rec.memory_facts(),
            "started_unix": rec._started,
            "finished_unix": time.time(),
        },
    )
    rec.write_progress(rec.last_loss, status)
    return code


if __name__ == "__main__":
    exit_code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    if (
        exit_code < 0
    ):  # a watched job stopped by Ctrl-C ends by that signal, as it would without Stepwise
        signal.signal(-exit_code, signal.SIG_DFL)
        os.kill(os.getpid(), -exit_code)
    os._exit(exit_code)  # DataLoader workers and the script's threads must not hold the exit
