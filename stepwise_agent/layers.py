"""Where in the model the profiled steps' time goes: per module, forward and backward, recorded
by the agent.

While the profiler records (the profiled window only), global module hooks
(``torch.nn.modules.module.register_module_forward_pre_hook`` / ``register_module_forward_hook``)
open and close one ``record_function`` range per module call, named ``stepwise.module: <qualified
name>``; a saved-tensor hook (autograd's default pack hook) adds up the bytes each module keeps for
backward. Nothing runs on the backward pass: when the window's trace is ready, :func:`layer_rows`
reads the profiler's own events:

- a module's **forward** time is its ranges' time: the GPU time of the kernels launched inside them
  on a GPU (the profiler links each kernel to the op that launched it), their CPU time otherwise;
- its **backward** time is that of the autograd nodes (``autograd::engine::evaluate_function: …``)
  whose sequence number is that of the forward op that made them (the last op to record that number)
  inside the module, charged to the innermost module and summed up into its parents.

``layers.json`` (:func:`write_layers`) holds one row per module of the ``named_modules()`` tree: its
name, class, where the class and its ``forward`` are defined, its parameters, its calls per step,
its forward and backward milliseconds per step and the activation bytes it kept for backward per
step (all of its submodules included).
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path
from typing import Any, Iterable

import torch

PREFIX = "stepwise.module: "
BACKWARD = "autograd::engine::evaluate_function: "
LAYERS_FILE = "layers.json"
OFF_ENV = "STEPWISE_LAYERS"  # "0": no module hooks at all


def _range(name: str) -> Any:
    """A ``record_function`` range: torch's C++ one where it has it (a few times cheaper per call
    than ``torch.autograd.profiler.record_function``), else that."""
    fast = getattr(torch._C._profiler, "_RecordFunctionFast", None)
    return fast(name) if fast is not None else torch.autograd.profiler.record_function(name)


def compiled_anything() -> bool:
    """Whether the script has compiled a graph (``torch.compile``): adding or removing global module
    hooks changes what its compiled code guards on, so it would recompile in the profiled window."""
    dynamo = sys.modules.get("torch._dynamo.utils")
    try:
        return bool(dynamo is not None and dynamo.counters["stats"]["unique_graphs"] > 0)
    except (AttributeError, KeyError, TypeError):
        return False


def enabled() -> bool:
    return os.environ.get(OFF_ENV, "1") != "0"


def _compiling() -> bool:
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and compiler.is_compiling())


class LayerRecorder:
    """Module hooks for the profiled window: :meth:`start` when it opens, :meth:`stop` when it
    ends."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}  # id(module) -> qualified name ("" for a root)
        self.modules: dict[str, torch.nn.Module] = {}
        self.roots: list[str] = []
        # a module's own saved activations (its submodules' apart)
        self.saved_bytes: dict[str, int] = {}
        self._stack: list[tuple[int, Any]] = []  # (id(module), the open range's handle)
        # (storage pointer, step): a storage counted once a step
        self._seen: set[tuple[int, int]] = set()
        self._params: set[int] = set()
        self._handles: list[Any] = []
        self._pushed = False
        self.saved_known = False  # the saved-tensor hook was in place
        self.step = 0
        self.skipped: str | None = None  # why no hook was installed

    def start(self) -> None:
        from torch.nn.modules import module as nn_module

        if compiled_anything():
            self.skipped = (
                "the script compiled its model (torch.compile): module hooks would "
                "make it recompile inside the profiled steps, so none was installed"
            )
            return

        self._handles = [
            nn_module.register_module_forward_pre_hook(self._pre),
            nn_module.register_module_forward_hook(self._post),
        ]
        try:
            torch._C._autograd._push_saved_tensors_default_hooks(self._pack, _unpack)
            self._pushed = self.saved_known = True
        except (AttributeError, RuntimeError):
            self._pushed = False

    def stop(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        if self._pushed:
            self._pushed = False
            try:
                torch._C._autograd._pop_saved_tensors_default_hooks()
            except RuntimeError:
                pass
        while self._stack:  # a forward that raised: its ranges are closed here
            self._stack.pop()[1].__exit__(None, None, None)

    def _name(self, module: torch.nn.Module) -> str:
        key = id(module)
        name = self.names.get(key)
        if name is not None:
            return name
        if not self._stack:  # a root: every module below it is named from its tree
            cls = type(module).__name__
            root = cls if not self.roots else f"{cls}#{len(self.roots)}"
            self.roots.append(root)
            for sub, m in module.named_modules():
                full = f"{root}.{sub}" if sub else root
                self.names.setdefault(id(m), full)
                self.modules.setdefault(full, m)
                self._params.update(p.data_ptr() for p in m.parameters(recurse=False))
            return self.names[key]
        parent = self.names.get(self._stack[-1][0], "")
        name = f"{parent}.{type(module).__name__}"  # a module outside its caller's tree
        self.names[key], self.modules[name] = name, module
        return name

    def _pre(self, module: torch.nn.Module, args: Any) -> None:
        if _compiling():
            return
        name = self._name(module)
        handle = _range(PREFIX + name)
        handle.__enter__()
        self._stack.append((id(module), handle))

    def _post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if _compiling():
            return
        key = id(module)
        if not any(k == key for k, _ in self._stack):
            return
        while self._stack:
            k, handle = self._stack.pop()
            handle.__exit__(None, None, None)
            if k == key:
                break

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        if self._stack:
            try:
                ptr = t.untyped_storage().data_ptr()
                size = t.untyped_storage().nbytes()
            except (RuntimeError, NotImplementedError):  # no storage (a tensor subclass, a fake)
                return t
            if ptr not in self._params and (ptr, self.step) not in self._seen:
                self._seen.add((ptr, self.step))
                name = self.names.get(self._stack[-1][0], "")
                self.saved_bytes[name] = self.saved_bytes.get(name, 0) + size
        return t

    def next_step(self) -> None:
        self.step += 1
        self._seen.clear()


def _unpack(t: torch.Tensor) -> torch.Tensor:
    return t


def _event_ms(e: Any, on_gpu: bool) -> float:
    us = e.device_time_total if on_gpu else e.cpu_time_total
    return float(us) / 1000.0


def _module_of(e: Any) -> str | None:
    """The innermost module range around event ``e`` (its own, if it is one)."""
    while e is not None:
        if e.name.startswith(PREFIX):
            return str(e.name[len(PREFIX) :])
        e = e.cpu_parent
    return None


def layer_times(events: Iterable[Any], on_gpu: bool) -> tuple[dict[str, list[float]], int]:
    """``{module: [forward_ms, backward_self_ms, calls]}`` over the window, and its count of
    profiler steps."""
    # Every op records the sequence number the next autograd node will take: the node is the last
    # op's of a
    # number (in time order), so the module of the last op with a number is the node's.
    events = sorted(events, key=lambda e: e.time_range.start)
    out: dict[str, list[float]] = {}
    seq_module: dict[int, str] = {}
    steps = 0
    for e in events:
        name = e.name
        if name.startswith("ProfilerStep"):  # "ProfilerStep*" in the event list
            steps += 1
        elif name.startswith(PREFIX):
            row = out.setdefault(name[len(PREFIX) :], [0.0, 0.0, 0])
            row[0] += _event_ms(e, on_gpu)
            row[2] += 1
        elif e.sequence_nr >= 0 and not name.startswith(BACKWARD) and not e.fwd_thread:
            module = _module_of(e.cpu_parent)
            if module is not None:
                seq_module[e.sequence_nr] = module
    for e in events:
        if e.name.startswith(BACKWARD) and e.sequence_nr >= 0:
            module = seq_module.get(e.sequence_nr)
            if module is not None:
                out.setdefault(module, [0.0, 0.0, 0])[1] += _event_ms(e, on_gpu)
    return out, steps


def _where(obj: Any) -> tuple[str | None, int | None]:
    try:
        return inspect.getsourcefile(obj), inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return None, None


def layer_rows(
    rec: LayerRecorder, events: Iterable[Any], on_gpu: bool, step_ms: float | None
) -> dict[str, Any]:
    """``layers.json``'s document: one row per module seen, its figures per profiled step,
    inclusive of its submodules (backward time and saved bytes summed up the tree)."""
    times, steps = layer_times(events, on_gpu)
    n = max(steps, 1)
    backward: dict[str, float] = {}
    saved: dict[str, int] = {}
    forward = {name: t[0] for name, t in times.items() if t[2]}
    for name in sorted(rec.modules, key=lambda n: -n.count(".")):  # deepest first
        parts = name.split(".")
        own_b = times.get(name, [0.0, 0.0, 0])[1]
        own_s = rec.saved_bytes.get(name, 0)
        for i in range(1, len(parts) + 1):
            up = ".".join(parts[:i])
            backward[up] = backward.get(up, 0.0) + own_b
            saved[up] = saved.get(up, 0) + own_s
        up_one = ".".join(parts[:-1])
        # a container never called itself (a ModuleList): its forward is its parts'
        if len(parts) > 1 and not times.get(up_one, [0.0, 0.0, 0])[2]:
            forward[up_one] = forward.get(up_one, 0.0) + forward.get(name, 0.0)
    classes: dict[type, tuple[Any, ...]] = {}
    rows = []
    for name, m in rec.modules.items():
        calls = times.get(name, [0.0, 0.0, 0])[2]
        cls = type(m)
        if cls not in classes:
            code = getattr(getattr(cls, "forward", None), "__code__", None)
            classes[cls] = (
                *_where(cls),
                getattr(code, "co_filename", None),
                getattr(code, "co_firstlineno", None),
            )
        class_file, class_line, forward_file, forward_line = classes[cls]
        parent = name.rsplit(".", 1)[0] if "." in name else None
        rows.append(
            {
                "name": name,
                "parent": parent,
                "class": cls.__name__,
                "class_file": class_file,
                "class_line": class_line,
                "forward_file": forward_file,
                "forward_line": forward_line,
                "params": sum(p.numel() for p in m.parameters()),
                "calls": calls / n,
                "forward_ms": round(forward.get(name, 0.0) / n, 4),
                "backward_ms": round(backward.get(name, 0.0) / n, 4),
                "saved_bytes": saved.get(name, 0) // n if rec.saved_known else None,
            }
        )
    return {
        "steps": steps,
        "device": "gpu" if on_gpu else "cpu",
        "step_ms": step_ms,
        "timing": (
            "GPU time of the kernels each module launched"
            if on_gpu
            else "CPU time inside each module"
        ),
        "rows": rows,
    }


def write_layers(
    run_dir: Path,
    rec: LayerRecorder,
    events: Iterable[Any],
    on_gpu: bool,
    step_ms: float | None,
    write: Any,
) -> None:
    """Write ``layers.json`` (through ``write``, the recorder's atomic JSON writer); nothing if no
    module ran."""
    if rec.skipped is not None:
        write(run_dir / LAYERS_FILE, {"rows": [], "note": rec.skipped})
    elif rec.modules:
        write(run_dir / LAYERS_FILE, layer_rows(rec, events, on_gpu, step_ms))
