"""``ScriptSpec``: a training script as something that can be run, measured and patched — a user's, or a sample
workload's (``python -m sample_runs.train WORKLOAD …``): one description, one path.

A script is described by the command that starts it plus what the launcher does around it: how many steps to let
it warm up, time and profile, the seeds every arm gets, the ranks to start, the run's memory budget, and
``inject`` — the knobs the boot module applies to the script's own objects (its DataLoader's keyword arguments,
autocast around its model, …; see :mod:`stepwise_agent.inject`) — or, where the script has its own flag for the
fix, the ``command`` with that flag changed and ``observe``: the knobs the agent then checks without injecting
them (:mod:`advisors.fixes.conventions`). The script's files are never written.

``memory_budget_mb`` is the run's memory limit (a sample workload's budget: ``memory_bound`` is built to pass it);
an experiment's reference arm lifts it. A run of a script spec takes ``warmup_steps`` untimed steps,
``measure_steps`` timed steps without profiler, then one profiler warm-up step and ``profile_steps`` profiled steps
(for the next diagnosis), and is stopped.
"""

from __future__ import annotations

import re
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Self

from profilers.errors import SpecError
from profilers.run.command import split_command, workload_of_command

#: Knobs the boot module understands, with the type of their value. ``None`` removes a knob.
KNOBS: Mapping[str, tuple[type, ...]] = {
    "num_workers": (int,),
    "pin_memory": (bool,),
    "persistent_workers": (bool,),
    "prefetch_factor": (int,),
    "cache_decoded": (bool,),
    "autocast": (str,),
    "compile": (bool,),
    "compile_mode": (str,),
    "channels_last": (bool,),
    "matmul_precision": (str,),
    "cudnn_benchmark": (bool,),
    "optimizer_impl": (str,),
    "bucket_cap_mb_factor": (int, float),
    "grad_compression": (str,),
    "static_graph": (bool,),
    "alloc_conf": (str,),
    "num_threads": (int,),
    "sdpa_attention": (bool,),
    # modules to checkpoint, comma-separated as the per-module record names them ("blocks.*")
    "checkpoint_modules": (str,),
    # convergence changes of ``optimize --to-quality`` (stepwise_agent.inject.convergence)
    "batch_scale": (int,),
    "lr_scale": (int, float),
    "warmup_steps": (int,),
    "grad_accum": (int,),
    "optimizer_swap": (str,),
    # observe-only: what a to-quality arm's changed command asks for (its own --batch-size, --learning_rate …)
    "batch_size": (int,),
    "lr": (int, float),
    "accumulation_steps": (int,),
    # observe-only: what the script's own loop does when its flag asks (stepwise_agent.inject.loop)
    "grad_accum_steps": (int,),
    "activation_checkpointing": (bool,),
    "ddp_no_sync": (bool,),
    "cuda_graphs": (bool,),
}
#: the knobs of ``optimize --to-quality`` that change convergence, not the step (a run with one is never a
#: step-time measurement)
CONVERGENCE_KNOBS = (
    "batch_scale",
    "lr_scale",
    "warmup_steps",
    "grad_accum",
    "optimizer_swap",
    "batch_size",
    "lr",
    "accumulation_steps",
)
#: ``env:NAME`` knobs: an environment variable the launcher gives the patched arm's processes from
#: their start, read by a runtime as it loads (OpenMP's wait policy, an allocator's settings); the
#: value is text. The baseline arm runs in the user's environment as it is.
ENV_KNOB = "env:"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_STEPS = 10_000
#: a launched script's first step must end within this many seconds (``--first-step-timeout``;
#: None: no limit): long enough for a big model's loading and an evaluation before the loop, short
#: enough that a script stuck before its loop is reported rather than waited on for ever
DEFAULT_FIRST_STEP_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class ScriptSpec:
    """A training script run by the launcher (see the module docs). ``command`` is ``python SCRIPT ARGS…`` or
    ``python -m MODULE ARGS…``; ``cwd`` is where it starts (the user's folder: relative paths keep working)."""

    command: tuple[str, ...]
    measure_steps: int = 20
    warmup_steps: int = 3
    profile_steps: int = 3
    seed: int = 0
    nproc_per_node: int = 1
    nnodes: int = 1
    rdzv_endpoint: str | None = None
    inject: Mapping[str, Any] = field(default_factory=dict)
    #: knobs the command itself sets (a fix mapped to the script's own flag or config line): the agent checks
    #: their effect and injects nothing for them
    observe: Mapping[str, Any] = field(default_factory=dict)
    cwd: str = field(default_factory=os.getcwd)
    python: str | None = (
        None  # the interpreter (--python); None: the command's own (profilers.run.interpreter)
    )
    #: the run's memory limit (MiB): the memory guard's on a CPU, the CUDA allocator's cap on a GPU; past it the
    #: run ends ``out_of_memory`` (None: the guard's default rule, the GPU's own memory)
    memory_budget_mb: float | None = None
    step_timeout_s: float | None = (
        None  # stop the run when no step ends for this long (None: never)
    )
    #: the run fails when its first step has not ended this long after the start (None: no limit)
    first_step_timeout_s: float | None = DEFAULT_FIRST_STEP_TIMEOUT_S

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(str(c) for c in self.command))
        object.__setattr__(self, "inject", dict(sorted((self.inject or {}).items())))
        object.__setattr__(self, "observe", dict(sorted((self.observe or {}).items())))
        for name in ("measure_steps", "profile_steps"):
            if not 1 <= getattr(self, name) <= MAX_STEPS:
                raise SpecError(
                    f"{name} must be between 1 and {MAX_STEPS}, got {getattr(self, name)}"
                )
        if not 0 <= self.warmup_steps <= MAX_STEPS:
            raise SpecError(
                f"warmup_steps must be between 0 and {MAX_STEPS}, got {self.warmup_steps}"
            )
        if self.nproc_per_node < 1 or self.nnodes < 1:
            raise SpecError("nproc_per_node and nnodes must be at least 1")
        if self.memory_budget_mb is not None and not self.memory_budget_mb >= 1:
            raise SpecError(f"memory_budget_mb must be at least 1 MB, got {self.memory_budget_mb}")
        if self.step_timeout_s is not None and not self.step_timeout_s > 0:
            raise SpecError(f"step_timeout_s must be positive, got {self.step_timeout_s}")
        if self.first_step_timeout_s is not None and not self.first_step_timeout_s > 0:
            raise SpecError(
                f"first_step_timeout_s must be positive (or null: no limit), got "
                f"{self.first_step_timeout_s}"
            )
        if self.nnodes > 1 and not self.rdzv_endpoint:
            raise SpecError(
                f"nnodes={self.nnodes} needs rdzv_endpoint (host:port of the rendezvous)"
            )
        for knob, value in [*self.inject.items(), *self.observe.items()]:
            if knob.startswith(ENV_KNOB):
                if not _ENV_NAME.fullmatch(knob[len(ENV_KNOB) :]) or not isinstance(value, str):
                    raise SpecError(
                        f"injection knob {knob} needs an environment variable's name after "
                        f"{ENV_KNOB!r} and text as its value, got {value!r}"
                    )
                continue
            if knob not in KNOBS:
                raise SpecError(f"unknown injection knob {knob!r}; known: {', '.join(KNOBS)}")
            if not isinstance(value, KNOBS[knob]) or (
                isinstance(value, bool) and bool not in KNOBS[knob]
            ):
                raise SpecError(
                    f"injection knob {knob} takes {KNOBS[knob][0].__name__}, got {value!r}"
                )

    # -- what the experiment machinery reads of any spec --------------------------------------------------
    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes

    @property
    def workload(self) -> str:
        """A sample workload's name, or ``script:NAME`` for a user's script."""
        return workload_of_command(self.command) or f"script:{self.name}"

    @property
    def name(self) -> str:
        target = script_target(self.command, self.cwd)
        return target[1] if target[0] == "-m" else Path(target[0]).name

    @property
    def total_steps(self) -> int:
        return self.warmup_steps + self.measure_steps + 1 + self.profile_steps

    def patch(self, **changes: Any) -> Self:
        """A copy with fields changed; ``inject`` entries are merged (``None`` removes a knob)."""
        for name in ("inject", "observe"):
            if name in changes:
                merged = {**getattr(self, name), **changes.pop(name)}
                changes[name] = {k: v for k, v in merged.items() if v is not None}
        return replace(self, **changes)

    def describe_diff(self, other: ScriptSpec) -> dict[str, tuple[Any, Any]]:
        """``{knob: (mine, other's)}`` for every injected knob (and plain field) that differs."""
        out: dict[str, tuple[Any, Any]] = {}
        mine, theirs = {**self.inject, **self.observe}, {**other.inject, **other.observe}
        for knob in sorted(set(mine) | set(theirs)):
            if mine.get(knob) != theirs.get(knob):
                out[knob] = (mine.get(knob), theirs.get(knob))
        if self.command != other.command:
            out["command"] = (list(self.command), list(other.command))
        for name in (
            "measure_steps",
            "warmup_steps",
            "profile_steps",
            "seed",
            "nproc_per_node",
            "nnodes",
            "memory_budget_mb",
        ):
            if getattr(self, name) != getattr(other, name):
                out[name] = (getattr(self, name), getattr(other, name))
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["command"], d["inject"], d["observe"] = (
            list(self.command),
            dict(self.inject),
            dict(self.observe),
        )
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScriptSpec:
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(f"unknown script spec field(s): {', '.join(unknown)}")
        fields: dict[str, Any] = {k: (tuple(v) if k == "command" else v) for k, v in data.items()}
        return cls(**fields)

    def boot_config(self) -> dict[str, Any]:
        """What the boot module reads from ``boot.json``."""
        return {
            "warmup": self.warmup_steps,
            "measure": self.measure_steps,
            "profile": self.profile_steps,
            "seed": self.seed,
            "inject": dict(self.inject),
            "observe": dict(self.observe),
        }

    def launch_env(self) -> dict[str, str]:
        """Environment the launcher gives the script for its knobs: ``num_threads`` as ``OMP_NUM_THREADS`` and
        ``MKL_NUM_THREADS``, read by the OpenMP/MKL runtimes when torch is first imported (the agent's
        ``torch.set_num_threads`` then finds the pool already that size) and inherited by the DataLoader workers and
        ranks the script starts."""
        n = self.inject.get("num_threads")
        threads = {"OMP_NUM_THREADS": str(n), "MKL_NUM_THREADS": str(n)} if n else {}
        return {**threads, **env_knobs(self.inject)}


def env_knobs(knobs: Mapping[str, Any]) -> dict[str, str]:
    """The environment variables of ``knobs``' ``env:NAME`` entries, ``{NAME: value}``."""
    return {k[len(ENV_KNOB) :]: str(v) for k, v in knobs.items() if k.startswith(ENV_KNOB)}


def script_target(command: tuple[str, ...] | list[str], cwd: str | None = None) -> list[str]:
    """``[SCRIPT, ARGS…]`` or ``["-m", MODULE, ARGS…]`` of a ``python …`` command (interpreter flags dropped)."""
    return split_command(list(command), cwd)[1]
