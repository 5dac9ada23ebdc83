"""A sample workload as a run: ``python -m sample_runs.train WORKLOAD FLAGS…``, launched exactly as a user's script.

The workload's settings (its size's, then the ones given: ``stepwise run --set``, the Launch form) become the
script's own flags (:mod:`sample_runs.options`) and the launcher's settings: the ranks torchrun starts, the memory
budget (the run's memory limit), the steps before and in the profiler's window. The script's package is copied into
the store (``<store>/.code/<hash>/sample_runs``, like the agent) and the run starts there, so its files are the run's
own, wherever Stepwise is installed. What comes back is a :class:`~profilers.run.script_spec.ScriptSpec`: from here
on a workload is a script like any other (``launch.start_script``, ``optimize``'s script strategy, Apply).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from profilers.errors import SpecError
from profilers.run.agent_path import package_folder
from profilers.run.script_spec import ScriptSpec
from stepwise_agent.steady import MIN_STEADY

PROFILER_WARMUP = 1  # the agent's: one step between the timed ones and the profiled ones


def _options() -> Any:
    from sample_runs import options  # imported on use: the registry imports torch

    return options


def parse_sets(sets: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``--set KEY=VALUE`` strings as ``(settings, workload params)``; SpecError (one line) when one is wrong."""
    from sample_runs import WorkloadError

    try:
        return _options().parse_sets(list(sets))
    except WorkloadError as err:
        raise SpecError(str(err)) from None


def shape(steps: int, warmup: int = 3, profile: int = 3) -> tuple[int, int, int]:
    """``(warm-up, timed, profiled)`` steps of a run of ``steps`` optimizer steps in all, the profiler's window last
    (its warm-up step and its ``profile`` recorded steps): a short run keeps at least one timed step by profiling
    one step and warming up less."""
    if steps < warmup + 1 + PROFILER_WARMUP + profile:
        profile = 1
        warmup = max(min(warmup, steps - 1 - PROFILER_WARMUP - profile), 0)
    return warmup, max(steps - warmup - PROFILER_WARMUP - profile, 1), profile


def default_steps(warmup: int = 3, profile: int = 3) -> int:
    """A run long enough for :data:`~stepwise_agent.steady.MIN_STEADY` steady steps: the timed steps, past the
    warm-up, before the profiler's warm-up step (the step next to its window) and its recorded steps, which end the
    run."""
    return warmup + MIN_STEADY + PROFILER_WARMUP + profile


def workload_spec(
    store_root: Path,
    workload: str,
    size: str = "tiny",
    values: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    steps: int | None = None,
    measure_steps: int | None = None,
    seeded: bool = False,
    allow_external: bool = False,
) -> ScriptSpec:
    """The run of ``workload`` at ``size`` with ``values`` (flags' and launcher's settings) and ``params``.

    ``steps``: the run's optimizer steps in all (default: the size's, at least :func:`default_steps`); the profiler's
    window closes it. ``measure_steps`` instead fixes the timed steps (an experiment's trials: warm-up, timed, then
    the profiler's window). ``seeded``: the command names its ``--seed`` even at its default (runs of several
    seeds change it there). Only registered workloads are run: ``allow_external`` also admits
    ``"package.module:NAME"`` (an opt-in of Python callers such as tests, never of the command line, the dashboard or
    a settings file, so nothing read from a file makes Stepwise import code). SpecError for an unknown workload,
    size, setting or one that does not fit."""
    from sample_runs import WORKLOADS, WorkloadError, get_workload

    if workload not in WORKLOADS and not (allow_external and ":" in workload):
        raise SpecError(
            f"unknown workload {workload!r}; known workloads: {', '.join(sorted(WORKLOADS))}"
        )

    options = _options()
    given = dict(values or {})
    try:
        launch = options.launch_settings(workload, size, given)
        sized = options.defaults(workload, size)
        warmup, profile = int(launch["warmup_steps"]), int(launch["profile_active"])
        if measure_steps is not None:
            timed = measure_steps
        else:
            total = (
                steps
                if steps is not None
                else _length(
                    get_workload(workload), size, {**sized, **given}, params, warmup, profile
                )
            )
            warmup, timed, profile = shape(total, warmup, profile)
        total = warmup + timed + PROFILER_WARMUP + profile
        script = {k: v for k, v in given.items() if k in options.BY_NAME}
        if script.get("epochs", sized["epochs"]) is None:
            script["steps"] = max(
                total, int(script.get("steps", sized["steps"]))
            )  # the script outlasts the window
        argv = options.command(workload, size, script, params, always=("seed",) if seeded else ())
    except WorkloadError as err:
        raise SpecError(str(err)) from None
    world, nnodes = int(launch["world_size"]), int(launch["nnodes"])
    import sample_runs

    return ScriptSpec(
        command=("python", "-m", options.SCRIPT, *argv),
        python=sys.executable,
        cwd=str(package_folder(store_root, Path(sample_runs.__file__).resolve().parent)),
        warmup_steps=warmup,
        measure_steps=timed,
        profile_steps=profile,
        seed=int(given.get("seed", sized["seed"])),
        nproc_per_node=world // nnodes,
        nnodes=nnodes,
        rdzv_endpoint=launch["rdzv_endpoint"],
        memory_budget_mb=launch["memory_budget_mb"],
        step_timeout_s=launch["step_timeout_s"],
    )


def _length(
    w: Any,
    size: str,
    settings: Mapping[str, Any],
    params: Mapping[str, Any] | None,
    warmup: int,
    profile: int,
) -> int:
    """A run's steps in all: its ``epochs`` over the data (the dataset is built to count them), else its ``steps``,
    at least :func:`default_steps`."""
    if settings.get("epochs") is None:
        return max(int(settings["steps"]), default_steps(warmup, profile))
    n = len(w.build(size, params, seed=int(settings["seed"])).dataset)
    per_rank = n // int(settings["world_size"])
    return int(settings["epochs"]) * max(per_rank // int(settings["batch_size"]), 1)


def workload_of(spec: ScriptSpec) -> str | None:
    """The workload a spec runs (``python -m sample_runs.train NAME …``), else None (a user's script)."""
    from profilers.run.command import workload_of_command

    return workload_of_command(spec.command)


#: A stored run's ``spec.json`` (a ``TrainingSpec``, before the workloads became a script) also held the profiler's
#: own window, which the agent now sets: read and set aside.
RETIRED = ("profile_wait", "profile_warmup", "profile_memory")


def settings_of(data: Mapping[str, Any]) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """``(workload, size, settings, params)`` of a settings mapping: ``workload``, its settings by name, ``params``
    (whose ``size`` is the size). A stored run's ``spec.json`` is one. SpecError for anything else."""
    if not isinstance(data, Mapping) or not isinstance(data.get("workload"), str):
        raise SpecError("a workload's settings are a mapping with a 'workload' name")
    params = dict(data.get("params") or {})
    size = str(params.pop("size", "tiny"))
    values = {k: v for k, v in data.items() if k not in ("workload", "params", *RETIRED)}
    return str(data["workload"]), size, values, params


def settings_file(path: Path) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """:func:`settings_of` a JSON or YAML file."""
    import json

    if not path.is_file():
        raise SpecError(f"{path}: no such spec file")
    import yaml

    text = path.read_text(encoding="utf-8")
    as_yaml = path.suffix.lower() in (".yaml", ".yml")
    try:
        data = yaml.safe_load(text) if as_yaml else json.loads(text)
    except (ValueError, yaml.YAMLError) as err:
        raise SpecError(f"{path}: not valid {'YAML' if as_yaml else 'JSON'}: {err}") from None
    return settings_of(data)
