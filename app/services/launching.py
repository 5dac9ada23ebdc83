"""Glue of the Launch page (no Streamlit here): the workload registry, its settings, start/cancel, live data.

Only registered workloads (``sample_runs.WORKLOADS``) or a script path the user typed are ever started —
never code from an upload. A workload is its own training script: the form's values become its command line
(``python -m sample_runs.train WORKLOAD --num-workers 2 …``, :mod:`cli.workloads`), shown before it starts, and it
is launched exactly as a script the user typed. ``sample_runs`` imports torch, so it is imported on first use, not
at startup.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Mapping

import pandas as pd

from cli import workloads as workload_runs
from profilers.run import launch

from profilers.errors import RunError
from profilers.run.handle import RunHandle, cancel_run
from profilers.run.records import RunResult, RunStatus
from profilers.run.script_spec import ScriptSpec
from profilers.store.runs import RunStore
from profilers.frames.telemetry import downsample_telemetry

#: The settings the form shows, in order, grouped (every other keeps the workload's value and can be changed with
#: ``KEY=VALUE`` lines): the script's flags (``sample_runs.options.FLAGS``) and the launcher's (``LAUNCH``).
KNOB_GROUPS: dict[str, tuple[str, ...]] = {
    "Training": (
        "batch_size",
        "steps",
        "lr",
        "lr_warmup_steps",
        "optimizer",
        "optimizer_impl",
        "seed",
    ),
    "Data loading": (
        "num_workers",
        "pin_memory",
        "persistent_workers",
        "prefetch_factor",
        "cache_decoded",
    ),
    "Numerics and memory": (
        "precision",
        "channels_last",
        "compile",
        "grad_accum_steps",
        "activation_checkpointing",
        "memory_budget_mb",
    ),
    "Distributed": ("world_size", "backend", "bucket_cap_mb", "ddp_no_sync", "grad_compression"),
    "Profiling": ("warmup_steps", "step_timeout_s"),
}


@dataclass(frozen=True)
class Knob:
    """How to edit one setting: ``kind`` is bool, choice, int, float or text; ``optional`` means 0 stands for
    None; ``help`` is what the script's ``--help`` says of it."""

    name: str
    kind: str
    options: tuple[Any, ...] = ()
    optional: bool = False
    help: str = ""


def knob(name: str) -> Knob:
    """The editor for setting ``name``, from the script's own table of flags."""
    from sample_runs import options

    f = options.BY_NAME.get(name) or options.LAUNCH_BY_NAME[name]
    return Knob(name, f.kind, f.choices, f.optional, f.help)


@dataclass(frozen=True)
class WorkloadInfo:
    name: str
    description: str
    intended_bottleneck: str | None
    sizes: tuple[str, ...]


def workloads() -> list[WorkloadInfo]:
    """The registered sample workloads."""
    import sample_runs

    return [
        WorkloadInfo(w.name, w.description, w.intended_bottleneck, tuple(w.sizes))
        for w in sample_runs.WORKLOADS.values()
    ]


def base_settings(workload: str, size: str) -> dict[str, Any]:
    """The workload's recommended settings at ``size`` (what the form starts from): its flags' and the launcher's,
    with ``steps`` the run's length (at least what five steady steps need)."""
    from sample_runs import options

    out = options.defaults(workload, size)
    out["steps"] = max(
        int(out["steps"]),
        workload_runs.default_steps(int(out["warmup_steps"]), int(out["profile_active"])),
    )
    return out


def build_run(
    store: RunStore, workload: str, size: str, values: Mapping[str, Any], sets: str = ""
) -> ScriptSpec:
    """The run the form describes: the base settings with the form's values (0 → None for optional knobs) and
    ``KEY=VALUE`` lines. SpecError with one sentence for a setting that does not fit."""
    changes: dict[str, Any] = {}
    for name, value in values.items():
        k = knob(name)
        if k.optional and k.kind in ("int", "float") and not value:
            value = None
        elif k.kind == "int" and value is not None:
            value = int(value)
        changes[name] = value
    lines = [
        line.strip()
        for line in sets.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    more, params = workload_runs.parse_sets(lines)
    changes.update(more)
    steps = changes.pop("steps", None)  # the run's length: the launcher's window closes it
    return workload_runs.workload_spec(
        store.root, workload, size, changes, params, steps=int(steps) if steps else None
    )


def shown_command(spec: ScriptSpec) -> str:
    """The run as its user would type it: the script's command line, with what the launcher adds (ranks under
    torchrun, the memory limit) said after it."""
    from advisors.fixes.conventions.shown import command_text

    text = command_text(spec.command)
    extra = []
    if spec.world_size > 1:
        extra.append(
            f"under torchrun, {spec.nproc_per_node} rank(s) per node"
            + (f" on {spec.nnodes} nodes" if spec.nnodes > 1 else "")
        )
    if spec.memory_budget_mb is not None:
        extra.append(f"memory limit {spec.memory_budget_mb:g} MiB")
    return text + (f"   # {'; '.join(extra)}" if extra else "")


def start_workload(
    spec: ScriptSpec, store: RunStore, workload: str, label: str | None = None
) -> RunHandle:
    """Start the workload's run as any script's: the launcher, the agent, its steps and profile."""
    return launch.start_script(spec, store, label=label or workload)


def default_interpreter() -> str:
    """The Launch page's interpreter field starts as the dashboard's own (shown, so it can be changed)."""
    return sys.executable


def script_cwd(argv: list[str], cwd: str | None) -> tuple[list[str], str]:
    """Where the script runs, and its command as it then reads: ``cwd`` when given (the script's path, if
    relative, is found from there, as after ``cd DIR`` in a shell), else the script's own folder — the script
    path then made absolute, so relative paths inside the script (``data/``, ``config/``) resolve from its
    folder."""
    given = (cwd or "").strip()
    if given:
        folder = Path(given).expanduser().resolve()
        if not folder.is_dir():
            raise RunError(f"working directory {given}: no such folder")
        return argv, str(folder)
    _, target = launch.split_command(argv)
    if target[0] == "-m":
        return argv, os.getcwd()
    script = Path(target[0]).resolve()
    index = len(argv) - len(target)
    return [*argv[:index], str(script), *argv[index + 1 :]], str(script.parent)


def shown_cwd(command: str, cwd: str | None) -> str | None:
    """The folder a command would run in (for the Launch page to show), or ``None`` when it cannot be told yet."""
    try:
        return script_cwd(shlex.split(command), cwd)[1] if command.strip() else None
    except (ValueError, RunError):
        return None


def start_script(
    command: str,
    steps: int,
    store: RunStore,
    label: str | None = None,
    python: str | None = None,
    cwd: str | None = None,
    watch: bool = False,
) -> RunHandle:
    """Launch the script in ``command`` (e.g. ``python train.py --lr 0.1``) unmodified, profiling ``steps`` (``watch``:
    to its own end, each capture profiling ``steps``: :func:`profilers.run.launch.start_watch`), in
    ``python`` (blank: the command's own interpreter, as a shell would find it), in ``cwd`` (blank: the script's
    folder; see :func:`script_cwd`)."""
    try:
        argv = shlex.split(command)
    except ValueError as err:
        raise RunError(f"cannot split the command: {err}") from None
    argv, folder = script_cwd(argv, cwd)
    if (
        watch
    ):  # the whole run, to the script's own end; ``steps`` is then what each capture profiles
        return launch.start_watch(
            argv,
            store,
            label=label or None,
            capture_steps=min(max(steps, 1), 100),
            python=(python or "").strip() or None,
            cwd=folder,
        )
    return launch.start_launch(
        argv,
        store,
        steps=steps,
        label=label or None,
        python=(python or "").strip() or None,
        cwd=folder,
    )


def followable(store: RunStore, run_id: str | None) -> str | None:
    """``run_id`` when the Launch page can follow it (a launched run or script, not a trial of an experiment)."""
    if run_id is None:
        return None
    try:
        record = store.get(run_id)
    except RunError:
        return None
    return run_id if record.kind in ("run", "launch") and record.parent is None else None


def cancel_reason(progress: Mapping[str, Any] | None) -> str:
    """ "cancelled by you at step N": the last step the run reported when the user pressed Cancel."""
    step = (progress or {}).get("step")
    return (
        f"cancelled by you at step {int(step)}"
        if isinstance(step, (int, float)) and step > 0
        else "cancelled by you before its first step"
    )


def cancel(store: RunStore, run_id: str, handle: RunHandle | None) -> str:
    """Stop a run: through this session's handle when it has one, else from the stored pid (any session).
    Returns the reason stored with it."""
    reason = cancel_reason(store.read_progress(run_id))
    store.request_cancel(
        run_id, reason
    )  # first: the live view stops its countdown on the next draw
    if handle is not None and handle.run_id == run_id:
        handle.cancel(reason)
    else:
        cancel_run(store, run_id, reason)
    return reason


@dataclass(frozen=True)
class Live:
    """What the live view shows of a run: its status, ``progress.json``, steps and downsampled telemetry."""

    status: RunStatus
    progress: dict[str, Any] | None
    steps: pd.DataFrame
    telemetry: pd.DataFrame
    error: str | None
    cancelled: str | None = None  # why a stop was asked (then no ETA is shown: the run is stopping)
    outcome: str = ""  # one sentence on how a finished run ended


def live(store: RunStore, run_id: str) -> Live:
    record = store.get(run_id)
    progress = store.read_progress(run_id)
    cancelled = store.read_cancel(run_id)
    return Live(
        status=record.status,
        progress=progress,
        steps=store.read_steps(run_id),
        telemetry=downsample_telemetry(store.read_telemetry(run_id), max_points=600),
        error=record.error,
        cancelled=cancelled,
        outcome=outcome_text(record.status, store.read_result(run_id), cancelled, record.error),
    )


def outcome_text(
    status: RunStatus, result: RunResult | None, cancelled: str | None, error: str | None
) -> str:
    """How a run ended, in words that tell the truth: a cancel is the user's, not a crash; a script the launcher
    stopped after its profiled steps was stopped on purpose."""
    if status is RunStatus.RUNNING:
        return "stopping: " + cancelled if cancelled else "running"
    steps = result.steps_done if result is not None else 0
    if cancelled and status is RunStatus.KILLED:
        return cancelled[:1].upper() + cancelled[1:] + "."
    if status is RunStatus.OK and result is not None and result.profile_cut:
        return (
            f"Profiled part of a step, then stopped your script after step {steps}: "
            f"{result.profile_cut[:1].upper()}{result.profile_cut[1:]}."
        )
    if status is RunStatus.OK and result is not None and result.profiled_then_stopped:
        return (
            f"Profiled {result.profiled_then_stopped} steps of your script, then stopped it "
            f"after step {steps}: a profile needs only those steps, so the script is not run to its end."
        )
    if status is RunStatus.OK:
        return f"Finished: ok after {steps} steps."
    return f"Ended {status.value} after {steps} steps" + (f": {error}" if error else ".")
