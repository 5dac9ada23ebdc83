"""Each framework's own switch for a knob: the keyword arguments of the call its user configures it with.

One table for both sides of the agent boundary: the agent sets these fields at boot
(:mod:`stepwise_agent.inject.frameworks`), and the analyst shows them in the user's file
(:mod:`advisors.experiments.script_diff`). Standard library only, and no torch, so Stepwise's own processes
can read it without importing torch.
"""

from __future__ import annotations

from typing import Any, Callable

#: knob -> its ``transformers.TrainingArguments`` fields (a callable maps the knob's value)
HF_FIELDS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "autocast": lambda v: (
        {"bf16": True, "fp16": False} if v == "bf16" else {"fp16": True, "bf16": False}
    ),
    "num_workers": lambda v: {"dataloader_num_workers": int(v)},
    "pin_memory": lambda v: {"dataloader_pin_memory": bool(v)},
    "persistent_workers": lambda v: {"dataloader_persistent_workers": bool(v)},
    "prefetch_factor": lambda v: {"dataloader_prefetch_factor": int(v)},
    "compile": lambda v: {"torch_compile": bool(v)},
    "compile_mode": lambda v: {"torch_compile_mode": str(v)},
    "matmul_precision": lambda v: {"tf32": True},
}
LIGHTNING_PRECISION = {
    "bf16": "bf16-mixed",
    "fp16": "16-mixed",
}  # ``L.Trainer/L.Fabric(precision=...)``
ACCELERATE_PRECISION = {"bf16": "bf16", "fp16": "fp16"}  # ``Accelerator(mixed_precision=...)``

#: the switch's call (as the agent records its site) -> knob -> its keyword arguments there
SWITCHES: dict[str, dict[str, Callable[[Any], dict[str, Any]]]] = {
    "training_arguments": HF_FIELDS,
    "lightning_trainer": {"autocast": lambda v: {"precision": LIGHTNING_PRECISION[str(v)]}},
    "fabric": {"autocast": lambda v: {"precision": LIGHTNING_PRECISION[str(v)]}},
    "accelerator": {"autocast": lambda v: {"mixed_precision": ACCELERATE_PRECISION[str(v)]}},
}
