"""``TrainingSpec``: the one frozen, validated description of a training run.

A run is fully described by its spec; a fix is a ``spec.patch(...)``. Every field is a knob the trainer
(``profilers.run.trainer``) really applies; where a knob cannot act on the device at hand the trainer records a
warning in the run result instead of pretending. Validation happens in ``__post_init__`` so that an invalid
spec can never exist, and every error is a :class:`~profilers.errors.SpecError` with one actionable sentence.

Serialisation: ``to_dict``/``from_dict``, ``to_json``/``from_json``, ``to_yaml``/``from_yaml`` round-trip
exactly. ``with_sets(["batch_size=64", "params.size=bench"])`` applies command-line ``--set`` strings,
coercing each value by the field's declared type.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, get_args, get_origin


from profilers.errors import SpecError

Device = Literal["auto", "cpu", "cuda"]
Precision = Literal["fp32", "bf16", "fp16"]
OptimizerName = Literal["sgd", "adam", "adamw"]
OptimizerImpl = Literal["default", "foreach", "fused"]
Backend = Literal["auto", "gloo", "nccl"]
Compression = Literal["none", "fp16", "bf16"]
# The modes torch.compile accepts (``torch._inductor.list_mode_options()``; tests/profilers/test_spec.py keeps
# this list equal to the installed torch's). Checked here so a typo fails at once, not inside the worker.
CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs", "lite"]


class FrozenParams(dict[str, Any]):
    """A read-only dict: picklable and JSON-able like a dict, but a patch can never mutate a parent spec."""

    def _readonly(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("spec params are read-only; use spec.patch(params={...})")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(json.dumps(self, sort_keys=True, default=repr))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenParams, (dict(self),))


@dataclass(frozen=True)
class TrainingSpec:
    """What to train and how. ``batch_size`` is per rank and per optimizer step (see ``grad_accum_steps``)."""

    workload: str
    params: Mapping[str, Any] = field(default_factory=dict)  # workload-specific, e.g. {"size": "bench"}
    batch_size: int = 32
    steps: int = 20  # optimizer steps; ignored when ``epochs`` is set
    epochs: int | None = None
    warmup_steps: int = 3  # excluded from the medians
    seed: int = 0
    device: Device = "auto"
    # DataLoader
    num_workers: int = 0
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetch_factor: int | None = None
    cache_decoded: bool = False  # keep decoded + transformed samples in (shared) memory after first use
    # Numerics and execution
    precision: Precision = "fp32"
    compile: bool = False
    compile_mode: CompileMode = "default"
    grad_accum_steps: int = 1  # micro-batch = batch_size // grad_accum_steps
    activation_checkpointing: bool = False
    channels_last: bool = False
    tf32: bool = False
    cudnn_benchmark: bool = False
    optimizer: OptimizerName = "sgd"
    lr: float = 0.01
    lr_warmup_steps: int = 0  # linear warm-up of the rate over the first optimizer steps (0: none)
    lr_warmup_from: float | None = None  # the warm-up's first rate (None: from 0)
    optimizer_impl: OptimizerImpl = "default"
    memory_budget_mb: int | None = None
    # Distributed
    world_size: int = 1  # ranks in all, across every node: each node runs world_size // nnodes of them
    backend: Backend = "auto"
    nnodes: int = 1
    rdzv_endpoint: str | None = None
    bucket_cap_mb: float = 25.0
    ddp_no_sync: bool = False  # all-reduce only on the last micro-batch of an accumulation
    grad_compression: Compression = "none"
    cuda_graphs: bool = False
    # Instrumentation (torch.profiler.schedule, counted after the warm-up steps)
    profile_wait: int = 1
    profile_warmup: int = 1
    profile_active: int = 3
    profile_memory: bool = True
    step_timeout_s: float | None = None

    def __post_init__(self) -> None:
        # Freeze params too: a shared mutable dict inside a frozen spec would let a patch leak into its parent.
        if not isinstance(self.params, Mapping):
            raise SpecError(f"params must be a mapping of workload parameters, got {type(self.params).__name__}")
        object.__setattr__(self, "params", FrozenParams(self.params))
        for f in dataclasses.fields(self):
            _check_type(f.name, getattr(self, f.name), _hints()[f.name])
        self._check_values()

    def _check_values(self) -> None:
        if not self.workload:
            raise SpecError("workload must name a registered workload, got an empty string")
        positive = ("batch_size", "steps", "grad_accum_steps", "world_size", "nnodes", "profile_active")
        for name in positive:
            if getattr(self, name) < 1:
                raise SpecError(f"{name} must be at least 1, got {getattr(self, name)}")
        non_negative = ("warmup_steps", "num_workers", "profile_wait", "profile_warmup", "seed", "lr_warmup_steps")
        for name in non_negative:
            if getattr(self, name) < 0:
                raise SpecError(f"{name} must be 0 or more, got {getattr(self, name)}")
        if self.epochs is not None and self.epochs < 1:
            raise SpecError(f"epochs must be at least 1 (or null to run `steps`), got {self.epochs}")
        if self.batch_size % self.grad_accum_steps:
            raise SpecError(
                f"batch_size={self.batch_size} is not divisible by grad_accum_steps={self.grad_accum_steps}; "
                "the micro-batch would not be whole"
            )
        if self.num_workers == 0 and self.persistent_workers:
            raise SpecError("persistent_workers=True needs num_workers > 0")
        if self.prefetch_factor is not None:
            if self.num_workers == 0:
                raise SpecError("prefetch_factor needs num_workers > 0 (the main process does not prefetch)")
            if self.prefetch_factor < 1:
                raise SpecError(f"prefetch_factor must be at least 1, got {self.prefetch_factor}")
        if self.lr <= 0:
            raise SpecError(f"lr must be positive, got {self.lr}")
        if self.bucket_cap_mb <= 0:
            raise SpecError(f"bucket_cap_mb must be positive, got {self.bucket_cap_mb}")
        if self.memory_budget_mb is not None and self.memory_budget_mb < 1:
            raise SpecError(f"memory_budget_mb must be at least 1 MB, got {self.memory_budget_mb}")
        if self.step_timeout_s is not None and self.step_timeout_s <= 0:
            raise SpecError(f"step_timeout_s must be positive, got {self.step_timeout_s}")
        if self.world_size % self.nnodes:
            raise SpecError(f"world_size={self.world_size} is not a multiple of nnodes={self.nnodes}: world_size "
                            "counts the ranks of all nodes together and every node runs the same number of them")
        if self.nnodes > 1 and not self.rdzv_endpoint:
            raise SpecError("nnodes > 1 needs rdzv_endpoint (host:port of the rendezvous)")
        if self.backend == "nccl" and self.device == "cpu":
            raise SpecError("backend='nccl' needs CUDA; use backend='gloo' (or 'auto') with device='cpu'")

    # ---- patching -------------------------------------------------------------------------------------------
    def patch(self, **changes: Any) -> TrainingSpec:
        """A new validated spec with ``changes`` applied; ``params`` merges into the existing params."""
        unknown = sorted(set(changes) - _field_names())
        if unknown:
            raise SpecError(f"unknown spec field(s) {unknown}; known fields: {sorted(_field_names())}")
        if "params" in changes:
            if not isinstance(changes["params"], Mapping):
                raise SpecError("a params patch must be a mapping")
            changes = {**changes, "params": {**self.params, **changes["params"]}}
        return dataclasses.replace(self, **changes)

    def with_sets(self, sets: list[str] | tuple[str, ...]) -> TrainingSpec:
        """Apply ``--set KEY=VALUE`` strings; ``params.NAME=VALUE`` sets a workload parameter (YAML-typed)."""
        changes: dict[str, Any] = {}
        params: dict[str, Any] = {}
        hints = _hints()
        for item in sets:
            key, sep, raw = item.partition("=")
            key = key.strip()
            if not sep or not key:
                raise SpecError(f"--set expects KEY=VALUE, got {item!r}")
            if key.startswith("params."):
                params[key.removeprefix("params.")] = _parse_scalar(raw)
            elif key in hints:
                changes[key] = _coerce(key, raw, hints[key])
            else:
                raise SpecError(f"unknown spec field {key!r} in --set; known fields: {sorted(_field_names())}")
        if params:
            changes["params"] = {**changes.get("params", {}), **params}
        return self.patch(**changes)

    def describe_diff(self, other: TrainingSpec) -> dict[str, tuple[Any, Any]]:
        """``{field: (self_value, other_value)}`` for every field that differs; params as ``params.NAME``."""
        diff: dict[str, tuple[Any, Any]] = {}
        for name in sorted(_field_names() - {"params"}):
            old, new = getattr(self, name), getattr(other, name)
            if old != new:
                diff[name] = (old, new)
        for key in sorted(set(self.params) | set(other.params)):
            old, new = self.params.get(key), other.params.get(key)
            if old != new:
                diff[f"params.{key}"] = (old, new)
        return diff

    # ---- serialisation --------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["params"] = dict(self.params)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainingSpec:
        if not isinstance(data, Mapping):
            raise SpecError(f"a spec must be a mapping, got {type(data).__name__}")
        unknown = sorted(set(data) - _field_names())
        if unknown:
            raise SpecError(f"unknown spec field(s) {unknown}; known fields: {sorted(_field_names())}")
        if "workload" not in data:
            raise SpecError("a spec needs a 'workload'")
        return cls(**{name: _numeric_text_as_float(name, value) for name, value in data.items()})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TrainingSpec:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise SpecError(f"spec is not valid JSON: {err}") from None
        return cls.from_dict(data)

    def to_yaml(self) -> str:
        import yaml  # only specs written as YAML need it: reading a trace never does

        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_yaml(cls, text: str) -> TrainingSpec:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise SpecError(f"spec is not valid YAML: {err}") from None
        return cls.from_dict(data)


# ---- type checking and coercion (driven by the annotations, so a new field needs no new code) -----------------
def _hints() -> dict[str, Any]:
    global _HINTS
    if _HINTS is None:
        _HINTS = typing.get_type_hints(TrainingSpec)
    return _HINTS


_HINTS: dict[str, Any] | None = None


def _field_names() -> set[str]:
    return {f.name for f in dataclasses.fields(TrainingSpec)}


def _check_type(name: str, value: Any, hint: Any) -> None:
    if not _matches(value, hint):
        raise SpecError(f"{name}={value!r} is not a valid {_describe(hint)}")


def _matches(value: Any, hint: Any) -> bool:
    origin = get_origin(hint)
    if origin is Literal:
        return value in get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:  # NaN would pass every `<= 0` check below it: a non-finite number is no setting
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is str:
        return isinstance(value, str)
    return True  # Mapping[...] is checked in __post_init__


def _describe(hint: Any) -> str:
    origin = get_origin(hint)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(hint))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in get_args(hint))
    return "null" if hint is type(None) else getattr(hint, "__name__", str(hint))


def _coerce(name: str, raw: str, hint: Any) -> Any:
    """Turn a ``--set`` string into a value of the field's type (``null``/``none`` for optional fields)."""
    text = raw.strip()
    args = _type_args(hint)
    if type(None) in args and text.lower() in ("null", "none", ""):
        return None
    for arg in (a for a in args if a is not type(None)):
        try:
            if get_origin(arg) is Literal or arg is str:
                return text
            if arg is bool:
                low = text.lower()
                if low in ("true", "1", "yes", "on"):
                    return True
                if low in ("false", "0", "no", "off"):
                    return False
                raise ValueError(text)
            if arg is int:
                return int(text)
            if arg is float:
                return float(text)
        except ValueError:
            continue
    raise SpecError(f"--set {name}={raw!r}: expected {_describe(hint)}")


_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _numeric_text_as_float(name: str, value: Any) -> Any:
    """A float field given as a decimal string becomes a float: PyYAML follows YAML 1.1, where ``1e-3`` (no dot)
    is a string, yet that is how everyone writes a learning rate. Other text is left for the type check to
    reject; only float fields are touched, so ``batch_size: "8"`` stays an error."""
    if not isinstance(value, str) or float not in _type_args(_hints().get(name)):
        return value
    if not _DECIMAL.fullmatch(value.strip()):
        raise SpecError(f"{name}={value!r} is not a valid {_describe(_hints()[name])} (write a number, e.g. 1e-3)")
    return float(value)


def _type_args(hint: Any) -> tuple[Any, ...]:
    return get_args(hint) if get_origin(hint) in (typing.Union, types.UnionType) else (hint,)


def _parse_scalar(raw: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        return raw
