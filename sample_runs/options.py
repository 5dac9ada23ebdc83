"""The command line of ``python -m sample_runs.train WORKLOAD``: every training knob is a flag of the script.

One table, :data:`FLAGS`, says each knob's name (its argparse ``dest`` and, with dashes, its flag:
``num_workers`` is ``--num-workers``), type, choices and default; a workload's size (``--size tiny``) sets the
defaults it recommends (batch, steps, learning rate). :data:`LAUNCH` lists the settings of a run that are the
launcher's, not the script's: how many ranks torchrun starts, the memory limit, the profiler's window.

:func:`parser_for` and :func:`checked` are what the script parses with; :func:`command` builds the script's arguments from ``name=value``
settings (the Launch form's, ``stepwise run``'s ``--set``), checking them with the same parser first, so a bad
value is refused before anything starts. Standard library only (argparse): no torch until the script trains.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from sample_runs.errors import WorkloadError

SCRIPT = "sample_runs.train"
PRECISIONS = ("fp32", "bf16", "fp16")
# The modes torch.compile accepts (``torch._inductor.list_mode_options()``; tests/sample_runs keep them equal).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs", "lite")


@dataclass(frozen=True)
class Flag:
    """One knob: ``name`` (its ``dest``), ``kind`` (``bool``, ``int``, ``float``, ``str`` or ``choice``),
    ``default``, ``group`` (the Launch form's heading), ``optional`` (``None`` is a value: "not set")."""

    name: str
    kind: str
    default: Any
    group: str
    help: str
    choices: tuple[str, ...] = ()
    optional: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


T, D, N, X = "Training", "Data loading", "Numerics and memory", "Distributed"
FLAGS: tuple[Flag, ...] = (
    Flag(
        "batch_size",
        "int",
        32,
        T,
        "samples per optimizer step on each rank (cut into --grad-accum-steps micro-batches)",
    ),
    Flag("steps", "int", 20, T, "optimizer steps to train (ignored with --epochs)"),
    Flag(
        "epochs",
        "int",
        None,
        T,
        "train this many passes over the data instead of --steps",
        optional=True,
    ),
    Flag("lr", "float", 0.01, T, "learning rate"),
    Flag(
        "lr_warmup_steps",
        "int",
        0,
        T,
        "linear warm-up of the rate over this many optimizer steps (0: none)",
    ),
    Flag("lr_warmup_from", "float", None, T, "the warm-up's first rate (default 0)", optional=True),
    Flag(
        "optimizer",
        "choice",
        "sgd",
        T,
        "the optimizer (SGD with momentum 0.9)",
        ("sgd", "adam", "adamw"),
    ),
    Flag(
        "optimizer_impl",
        "choice",
        "default",
        T,
        "the optimizer's implementation (default: torch's choice)",
        ("default", "foreach", "fused"),
    ),
    Flag("seed", "int", 0, T, "seed of the data, the weights and the data order"),
    Flag(
        "device",
        "choice",
        "auto",
        T,
        "where to train (auto: CUDA when present)",
        ("auto", "cpu", "cuda"),
    ),
    Flag(
        "num_workers", "int", 0, D, "DataLoader worker processes (0: load in the training process)"
    ),
    Flag("pin_memory", "bool", False, D, "copy batches through pinned host memory (CUDA)"),
    Flag("persistent_workers", "bool", False, D, "keep the workers alive across epochs"),
    Flag("prefetch_factor", "int", None, D, "batches each worker prepares ahead", optional=True),
    Flag(
        "cache_decoded",
        "bool",
        False,
        D,
        "keep decoded samples in shared memory after their first use",
    ),
    Flag(
        "precision", "choice", "fp32", N, "autocast precision (fp16 adds a GradScaler)", PRECISIONS
    ),
    Flag("compile", "bool", False, N, "torch.compile the model"),
    Flag("compile_mode", "choice", "default", N, "torch.compile's mode", COMPILE_MODES),
    Flag(
        "grad_accum_steps",
        "int",
        1,
        N,
        "micro-batches per optimizer step: the batch is split, the same "
        "samples per step with fewer activations alive at once",
    ),
    Flag(
        "activation_checkpointing",
        "bool",
        False,
        N,
        "recompute each block's activations in backward",
    ),
    Flag("channels_last", "bool", False, N, "NHWC memory format for the model and its 4-D inputs"),
    Flag("tf32", "bool", False, N, "TF32 matmuls and convolutions (CUDA)"),
    Flag("cudnn_benchmark", "bool", False, N, "let cuDNN time its convolution algorithms (CUDA)"),
    Flag(
        "cuda_graphs",
        "bool",
        False,
        N,
        "capture the step in CUDA graphs (torch.compile mode reduce-overhead)",
    ),
    Flag(
        "backend",
        "choice",
        "auto",
        X,
        "process group backend (auto: nccl on CUDA, else gloo)",
        ("auto", "gloo", "nccl"),
    ),
    Flag("bucket_cap_mb", "float", 25.0, X, "DistributedDataParallel's gradient bucket size"),
    Flag(
        "ddp_no_sync",
        "bool",
        False,
        X,
        "all-reduce only on the last micro-batch of a step (no_sync)",
    ),
    Flag(
        "grad_compression",
        "choice",
        "none",
        X,
        "all-reduce gradients in a narrower type (a DDP comm hook)",
        ("none", "fp16", "bf16"),
    ),
)
BY_NAME = {f.name: f for f in FLAGS}

#: The run's settings that are the launcher's: ``world_size`` (ranks of all nodes; torchrun starts
#: ``world_size // nnodes`` here), ``memory_budget_mb`` (the run's memory limit: the host memory guard's on a CPU,
#: the CUDA allocator's cap on a GPU), the steps before the profiler's window and in it, a step timeout.
LAUNCH: tuple[Flag, ...] = (
    Flag(
        "world_size", "int", 1, X, "ranks in all (torchrun starts world_size / nnodes on this node)"
    ),
    Flag("nnodes", "int", 1, X, "nodes; every node runs the same command"),
    Flag(
        "rdzv_endpoint",
        "str",
        None,
        X,
        "HOST:PORT of the rendezvous, for nnodes > 1",
        optional=True,
    ),
    Flag(
        "memory_budget_mb",
        "int",
        None,
        N,
        "stop the run (out_of_memory) above this many MiB",
        optional=True,
    ),
    Flag("warmup_steps", "int", 3, "Profiling", "steps before the timed ones (never timed)"),
    Flag(
        "profile_active", "int", 3, "Profiling", "steps the profiler records, after the timed ones"
    ),
    Flag(
        "step_timeout_s",
        "float",
        None,
        "Profiling",
        "stop a run whose step takes longer than this",
        optional=True,
    ),
)
LAUNCH_BY_NAME = {f.name: f for f in LAUNCH}


def workload_of(name: str) -> Any:
    """The registered workload ``name`` (WorkloadError naming the known ones)."""
    from sample_runs import (
        get_workload,
    )  # the registry imports torch: only when a workload is asked for

    return get_workload(name)


def defaults(workload: str, size: str = "tiny") -> dict[str, Any]:
    """Every setting of ``workload`` at ``size``: the flags' and the launcher's defaults, then the size's."""
    base = {f.name: f.default for f in (*FLAGS, *LAUNCH)}
    return {**base, **workload_of(workload).settings(size)}


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise ValueError(text)


def coerce(flag: Flag, value: Any) -> Any:
    """``value`` (a string from ``--set``, or a typed value) as ``flag``'s type; ValueError if it is not one."""
    if isinstance(value, str):
        text = value.strip()
        if flag.optional and text.lower() in ("", "null", "none"):
            return None
        read: dict[str, Callable[[str], Any]] = {"bool": _bool, "int": int, "float": float}
        value = read.get(flag.kind, str)(text)
    if value is None and flag.optional:
        return None
    if flag.kind == "bool" and not isinstance(value, bool):
        raise ValueError(value)
    if flag.kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
        if not (isinstance(value, float) and value.is_integer()):
            raise ValueError(value)
        value = int(value)
    if flag.kind == "float" and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ValueError(value)
    if flag.kind == "float":
        value = float(value)
    if flag.choices and value not in flag.choices:
        raise ValueError(value)
    return value


def scalar(text: str) -> Any:
    """A workload parameter's value as typed on a command line: a number, true/false, null, else the text."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none", "~"):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_sets(sets: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``KEY=VALUE`` strings (``stepwise run --set``, the Launch form's extra lines) as ``(settings, params)``:
    ``params.NAME=VALUE`` is a workload parameter; any other key a flag's or a launcher setting's name."""
    values: dict[str, Any] = {}
    params: dict[str, Any] = {}
    for item in sets:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise WorkloadError(f"--set expects KEY=VALUE, got {item!r}")
        if key.startswith("params."):
            params[key.removeprefix("params.")] = scalar(raw)
            continue
        flag = BY_NAME.get(key) or LAUNCH_BY_NAME.get(key)
        if flag is None:
            raise WorkloadError(
                f"unknown setting {key!r} in --set; known: "
                f"{', '.join(sorted([*BY_NAME, *LAUNCH_BY_NAME]))}, params.NAME"
            )
        try:
            values[key] = coerce(flag, raw)
        except ValueError:
            raise WorkloadError(f"--set {key}={raw!r}: expected {_describe(flag)}") from None
    return values, params


def _describe(flag: Flag) -> str:
    what = (
        "one of " + ", ".join(repr(c) for c in flag.choices)
        if flag.choices
        else {"bool": "true or false", "int": "an integer", "float": "a number", "str": "text"}[
            flag.kind
        ]
    )
    return what + (" (or null)" if flag.optional else "")


# -- the script's parser ------------------------------------------------------------------------------------
def parser(prog: str = f"python -m {SCRIPT}") -> argparse.ArgumentParser:
    """The script's parser (defaults: :data:`FLAGS`'; the script sets its size's with ``set_defaults``)."""
    p = argparse.ArgumentParser(
        prog=prog, description="Train a sample workload (sample_runs.WORKLOADS)."
    )
    p.add_argument("workload", help="the workload's name (data_bound, compute_bound, …)")
    p.add_argument("--size", default="tiny", help="the workload's size preset (tiny, bench, …)")
    p.add_argument(
        "--set-param",
        dest="set_param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a workload parameter, e.g. --set-param images=128",
    )
    for f in FLAGS:
        if f.kind == "bool":
            p.add_argument(f.flag, dest=f.name, action="store_true", default=f.default, help=f.help)
        elif f.kind == "choice":
            p.add_argument(f.flag, dest=f.name, choices=f.choices, default=f.default, help=f.help)
        else:
            p.add_argument(
                f.flag,
                dest=f.name,
                type={"int": int, "float": float}.get(f.kind, str),
                default=f.default,
                help=f.help,
            )
    return p


def parser_for(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The script's parser with the defaults of the workload and size ``argv`` names (read ahead by a small parser
    of their own), so ``--help`` and every value not given show what the size recommends."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("workload", nargs="?")
    pre.add_argument("--size", default="tiny")
    known, _ = pre.parse_known_args(argv)
    p = parser()
    if known.workload:
        try:
            sized = workload_of(known.workload).settings(known.size)
        except WorkloadError as err:
            p.error(str(err))
        p.set_defaults(**{k: v for k, v in sized.items() if k in BY_NAME})
    return p


def checked(p: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """``args`` once every value is checked (``p.error``: exit 2 with one line, if not), with ``params``: the
    workload parameters ``--set-param`` gave."""
    problem = check(vars(args))
    if problem is not None:
        p.error(problem)
    try:
        args.params = params_of(args.set_param)
        workload_of(args.workload).resolve_params(args.size, args.params)
    except WorkloadError as err:
        p.error(str(err))
    return args


def params_of(items: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise WorkloadError(f"--set-param expects NAME=VALUE, got {item!r}")
        out[name.strip()] = scalar(raw)
    return out


def check(s: Mapping[str, Any]) -> str | None:
    """Why the settings ``s`` (flags and, when present, launcher settings) do not make a run; None when they do."""

    def get(name: str) -> Any:
        return s.get(name, (BY_NAME.get(name) or LAUNCH_BY_NAME[name]).default)

    for name in (
        "batch_size",
        "steps",
        "grad_accum_steps",
        "world_size",
        "nnodes",
        "profile_active",
    ):
        if get(name) < 1:
            return f"{name} must be at least 1, got {get(name)}"
    for name in ("num_workers", "seed", "lr_warmup_steps", "warmup_steps"):
        if get(name) < 0:
            return f"{name} must be 0 or more, got {get(name)}"
    if get("epochs") is not None and get("epochs") < 1:
        return f"epochs must be at least 1 (or unset, to train --steps), got {get('epochs')}"
    if get("batch_size") % get("grad_accum_steps"):
        return (
            f"batch_size={get('batch_size')} is not divisible by grad_accum_steps={get('grad_accum_steps')}; "
            "the micro-batch would not be whole"
        )
    if get("num_workers") == 0 and get("persistent_workers"):
        return "persistent_workers needs num_workers > 0"
    if get("prefetch_factor") is not None and (
        get("num_workers") == 0 or get("prefetch_factor") < 1
    ):
        return "prefetch_factor needs num_workers > 0 (the main process does not prefetch) and must be at least 1"
    for name in ("lr", "bucket_cap_mb"):
        if get(name) <= 0:
            return f"{name} must be positive, got {get(name)}"
    if get("backend") == "nccl" and get("device") == "cpu":
        return "backend nccl needs CUDA; use gloo (or auto) with device cpu"
    if get("memory_budget_mb") is not None and get("memory_budget_mb") < 1:
        return f"memory_budget_mb must be at least 1 MB, got {get('memory_budget_mb')}"
    if get("step_timeout_s") is not None and get("step_timeout_s") <= 0:
        return f"step_timeout_s must be positive, got {get('step_timeout_s')}"
    if get("world_size") % get("nnodes"):
        return (
            f"world_size={get('world_size')} is not a multiple of nnodes={get('nnodes')}: world_size counts the "
            "ranks of all nodes together and every node runs the same number of them"
        )
    if get("nnodes") > 1 and not get("rdzv_endpoint"):
        return "nnodes > 1 needs rdzv_endpoint (host:port of the rendezvous)"
    return None


# -- a run's command line, from settings --------------------------------------------------------------------
def command(
    workload: str,
    size: str = "tiny",
    values: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    always: Sequence[str] = (),
) -> list[str]:
    """The script's arguments (after ``python -m sample_runs.train``) for ``workload`` at ``size`` with the flag
    ``values`` (launcher settings among them are left out: see :data:`LAUNCH`) and workload ``params``: only what
    differs from the size's defaults is written, and the flags named in ``always``. WorkloadError for an unknown
    name or settings that do not fit."""
    sized = defaults(workload, size)
    given = dict(values or {})
    unknown = sorted(set(given) - set(BY_NAME) - set(LAUNCH_BY_NAME))
    if unknown:
        raise WorkloadError(
            f"unknown setting(s) {unknown}; known: {', '.join(sorted([*BY_NAME, *LAUNCH_BY_NAME]))}"
        )
    for name, value in given.items():
        flag = BY_NAME.get(name) or LAUNCH_BY_NAME[name]
        try:
            given[name] = coerce(flag, value)
        except ValueError:
            raise WorkloadError(f"{name}={value!r} is not {_describe(flag)}") from None
    merged = {**sized, **given}
    problem = check(merged)
    if problem is not None:
        raise WorkloadError(problem)
    workload_of(workload).resolve_params(size, params)  # unknown parameters are refused here
    argv = [workload] + (["--size", size] if size != "tiny" else [])
    for f in FLAGS:
        value = merged[f.name]
        if value == sized[f.name] and f.name not in always:
            continue
        if f.kind == "bool":
            if not value:  # a size never turns a switch on, so off is its default: nothing to write
                continue
            argv.append(f.flag)
        else:
            argv += [f.flag, _text(value)]
    for name, value in (params or {}).items():
        argv += ["--set-param", f"{name}={_text(value)}"]
    return argv


def launch_settings(
    workload: str, size: str = "tiny", values: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The launcher's settings (:data:`LAUNCH`) of a run: the size's, with ``values`` over them."""
    merged = {**defaults(workload, size), **(values or {})}
    return {f.name: merged[f.name] for f in LAUNCH}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)
