"""Profile a training script nobody changed: ``python -m profilers launch -- python train.py ARGS…``.

The script runs in the user's interpreter (:mod:`profilers.run.interpreter`: ``--python PATH``, else the
command's ``python`` as a shell would find it on PATH, or the exact path given), with
``-m stepwise_agent.boot RUN_DIR N`` before the script (or ``-m module``); interpreter flags such as ``-u`` or
``-X dev`` are kept. ``accelerate launch OPTIONS… train.py ARGS…`` runs as typed, with the boot module as the
module accelerate launches (``--module``), in the interpreter beside the ``accelerate`` command. The agent is
found through ``PYTHONPATH`` (:mod:`profilers.run.agent_path`: a folder holding the agent alone); nothing is installed into the user's environment. Only a script path or module the
user typed is run: never ``-c`` code or stdin. The run is stored like any other (kind ``launch``), with the
command, the resolved interpreter and its torch in ``launch.json``.

With ``nproc_per_node > 1`` (or ``nnodes > 1``) the boot module runs under ``torchrun`` of that same
interpreter (``<python> -m torch.distributed.run``) — every rank instrumented, each rank's output kept under
``RUN_DIR/ranks`` (``--log-dir``, ``--tee 3``); the script initialises its own process group from torchrun's
environment. :func:`start_script` runs a :class:`~profilers.run.script_spec.ScriptSpec`: the same launch plus a
``boot.json`` (seeds, warm-up/measured/profiled steps, fix knobs to inject) and the spec in ``script.json``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping

from profilers.errors import RunError
from profilers.efficiency import calibrate
from profilers.run import interpreter as interp
from profilers.run.command import accelerate_launch, split_command
from profilers.run.agent_path import agent_folder, child_pythonpath
from profilers.run.handle import RunHandle, follow, spawn
from profilers.run.memory_guard import MEMORY_LIMIT_ENV
from profilers.run.records import RunResult
from profilers.run.script_spec import DEFAULT_FIRST_STEP_TIMEOUT_S, ScriptSpec
from profilers.store.runs import RunStore

DEFAULT_STEPS = 5
MAX_STEPS = 10_000


def interpreter_for(
    command: list[str], python: str | None = None, env: Mapping[str, str] | None = None
) -> str:
    """The interpreter that runs ``command`` (see :mod:`profilers.run.interpreter` for the rule)."""
    if python:
        return interp.resolve(python, env)
    argv = command[1:] if command and command[0] == "--" else command
    if (
        accelerate_launch(argv) is not None
    ):  # the interpreter beside the accelerate command (its environment's)
        tool = interp.resolve(argv[0], env)
        return interp.resolve(os.path.join(os.path.dirname(tool), "python"), env)
    if argv and not argv[0].endswith(".py"):
        return interp.resolve(argv[0], env)
    return interp.own_interpreter()


def boot_command(
    command: list[str],
    run_dir: Path,
    steps: int,
    nproc_per_node: int = 1,
    nnodes: int = 1,
    rdzv_endpoint: str | None = None,
    cwd: str | None = None,
    python: str | None = None,
) -> list[str]:
    """The command that runs ``command`` under :mod:`stepwise_agent.boot`, profiling ``steps`` steps, in the
    interpreter :func:`interpreter_for` names; under that interpreter's ``torchrun`` for more than one rank
    (interpreter flags cannot pass through torchrun and are dropped)."""
    flags, target = split_command(command, cwd)
    python = python or interpreter_for(command)
    boot = ["-m", "stepwise_agent.boot", str(run_dir), str(steps), *target]
    launcher = accelerate_launch(command)
    if (
        launcher is not None
    ):  # accelerate's own launcher, its options as typed, starts the boot module
        if nproc_per_node > 1 or nnodes > 1:
            raise RunError(
                "accelerate launch starts its own processes: give --num_processes to it, not Stepwise"
            )
        return [python, "-m", "accelerate.commands.launch", *launcher[0], *boot]
    if nproc_per_node <= 1 and nnodes <= 1:
        return [python, *flags, *boot]
    if nnodes > 1 and not rdzv_endpoint:
        raise RunError(f"--nnodes {nnodes} needs --rdzv-endpoint HOST:PORT")
    rdzv = (
        ["--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv_endpoint]
        if rdzv_endpoint
        else ["--standalone"]
    )
    logs = [
        "--log-dir",
        str(run_dir / "ranks"),
        "--tee",
        "3",
    ]  # every rank's stdout/stderr kept, and shown
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        str(nproc_per_node),
        "--nnodes",
        str(nnodes),
        *rdzv,
        *logs,
        *boot,
    ]


def start_launch(
    command: list[str],
    store: RunStore,
    steps: int = DEFAULT_STEPS,
    label: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    nproc_per_node: int = 1,
    nnodes: int = 1,
    rdzv_endpoint: str | None = None,
    boot: Mapping[str, Any] | None = None,
    files: Mapping[str, Any] | None = None,
    cwd: str | None = None,
    parent: str | None = None,
    python: str | None = None,
    memory_budget_mb: float | None = None,
    step_timeout_s: float | None = None,
    first_step_timeout_s: float | None = DEFAULT_FIRST_STEP_TIMEOUT_S,
) -> RunHandle:
    """Store a ``launch`` run and start the script in the user's interpreter (``python`` overrides the command's
    own); returns without waiting. RunError for a bad command, a missing interpreter or one without torch.

    ``memory_budget_mb`` limits the run: on a CPU it is the memory guard's limit (``STEPWISE_MEMORY_LIMIT_MB``), on a
    GPU the agent caps the CUDA allocator at it (``torch.cuda.set_per_process_memory_fraction``); either way the run
    ends ``out_of_memory`` past it. ``step_timeout_s``: the run is stopped when no step ends for
    that long; ``first_step_timeout_s``: the run fails when its first step has not ended that long
    after the start (None: no limit), the error saying what the script printed last."""
    if not 1 <= steps <= MAX_STEPS:
        raise RunError(f"--steps must be between 1 and {MAX_STEPS}, got {steps}")
    command = (
        command[1:] if command[:1] == ["--"] else list(command)
    )  # the command line's separator
    if not 1 <= nproc_per_node <= 64 or not 1 <= nnodes <= 1024:
        raise RunError(
            f"--nproc-per-node must be 1..64 and --nnodes 1..1024, got {nproc_per_node}, {nnodes}"
        )
    _, target = split_command(command, cwd)
    env = {**os.environ, **(extra_env or {})}
    interpreter = interpreter_for(command, python, env)
    facts = interp.probe(interpreter)
    name = target[1] if target[0] == "-m" else Path(target[0]).name
    content = {
        "launch.json": {
            "command": list(command),
            "steps": steps,
            "cwd": cwd or os.getcwd(),
            "nproc_per_node": nproc_per_node,
            "nnodes": nnodes,
            "interpreter": interpreter,
            "python_version": facts.get("python_version"),
            "torch_version": facts.get("torch_version"),
            "torch_cuda": facts.get("torch_cuda"),
            "cuda_available": facts.get("cuda_available"),
            "memory_budget_mb": memory_budget_mb,
        },
        **(files or {}),
    }
    cuda = bool(facts.get("cuda_available"))
    if memory_budget_mb is not None and cuda:
        boot = {**(boot or {}), "cuda_memory_budget_mb": memory_budget_mb}
    if boot is not None:
        content["boot.json"] = dict(boot)
    record = store.create(
        "launch",
        label or name,
        files=content,
        parent=parent,
        role="trial" if parent else None,
        world_size=nproc_per_node * nnodes,
    )
    run_dir = Path(record.run_dir)
    if not facts.get(
        "cuda_available"
    ):  # a CPU run: its cores' matmul peak (MFU) and bf16 rate, in its interpreter
        calibrate.record(run_dir, interpreter)
    argv = boot_command(
        command, run_dir, steps, nproc_per_node, nnodes, rdzv_endpoint, cwd, interpreter
    )
    child_env = {**(extra_env or {}), "PYTHONPATH": child_pythonpath(agent_folder(store.root), env)}
    if memory_budget_mb is not None and not cuda:
        child_env[MEMORY_LIMIT_ENV] = f"{memory_budget_mb:g}"
    return spawn(
        store,
        record.run_id,
        argv,
        child_env,
        cwd=cwd,
        agent=True,
        hang_timeout_s=step_timeout_s,
        first_step_timeout_s=first_step_timeout_s,
    )


def start_script(
    spec: ScriptSpec,
    store: RunStore,
    label: str | None = None,
    parent: str | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> RunHandle:
    """Run a :class:`ScriptSpec`: seeds, warm-up, measured and profiled steps, injected knobs (``boot.json``)."""
    return start_launch(
        list(spec.command),
        store,
        steps=spec.profile_steps,
        label=label or spec.name,
        extra_env={**spec.launch_env(), **(extra_env or {})},
        nproc_per_node=spec.nproc_per_node,
        nnodes=spec.nnodes,
        rdzv_endpoint=spec.rdzv_endpoint,
        boot=spec.boot_config(),
        files={"script.json": spec.to_dict()},
        cwd=spec.cwd,
        parent=parent,
        python=spec.python,
        memory_budget_mb=spec.memory_budget_mb,
        step_timeout_s=spec.step_timeout_s,
        first_step_timeout_s=spec.first_step_timeout_s,
    )


def start_watch(
    command: list[str],
    store: RunStore,
    label: str | None = None,
    capture_steps: int = 3,
    per_hour: int | None = None,
    max_share: float | None = None,
    nproc_per_node: int = 1,
    nnodes: int = 1,
    rdzv_endpoint: str | None = None,
    cwd: str | None = None,
    python: str | None = None,
    memory_budget_mb: float | None = None,
    judged_s: float | None = None,
    min_rise: float | None = None,
) -> RunHandle:
    """Watch the whole run (``stepwise watch``): the script runs to its own end under the agent with the profiler
    off, every step recorded, and profiles ``capture_steps`` steps whenever its step time, batch-drawing share or
    memory changes (:mod:`stepwise_agent.watch`, :mod:`stepwise_agent.trigger`; at most ``per_hour`` captures an
    hour, taking at most ``max_share`` of the run's time; a shift must hold for ``judged_s`` seconds of steps, 2 by
    default, and a step-time rise be at least ``min_rise`` of the step time, by default 0.2 on a GPU, 0.5 on the
    host's cores). Its captures become runs of their own as they are written (:mod:`profilers.run.captures`)."""
    if not 1 <= capture_steps <= 100:
        raise RunError(f"--capture-steps must be between 1 and 100, got {capture_steps}")
    watch: dict[str, Any] = {"capture_steps": capture_steps}
    if per_hour is not None:
        watch["per_hour"] = per_hour
    if max_share is not None:
        watch["max_share"] = max_share
    if judged_s is not None:
        if not 0.1 <= judged_s <= 600:
            raise RunError(f"--judged-s must be between 0.1 and 600 seconds, got {judged_s}")
        watch["judged_s"] = judged_s
    if min_rise is not None:
        if not 0.0 <= min_rise <= 100.0:
            raise RunError(
                f"--min-rise must be between 0 and 100 (a share of the step time), got {min_rise}"
            )
        watch["min_rise"] = min_rise
    return start_launch(
        command,
        store,
        steps=capture_steps,
        label=label,
        nproc_per_node=nproc_per_node,
        nnodes=nnodes,
        rdzv_endpoint=rdzv_endpoint,
        boot={"watch": watch},
        cwd=cwd,
        python=python,
        memory_budget_mb=memory_budget_mb,
        # the user's whole job: its setup may take any time
        first_step_timeout_s=None,
    )


def launch(
    command: list[str],
    store: RunStore,
    steps: int = DEFAULT_STEPS,
    label: str | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    timeout_s: float | None = None,
    python: str | None = None,
) -> tuple[RunHandle, RunResult]:
    """Launch and wait; a crash or kill of the script is a result with a status, never an exception."""
    handle = start_launch(command, store, steps, label, python=python)
    return handle, follow(handle, on_progress, timeout_s)
