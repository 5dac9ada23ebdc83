"""A fix in the script's own terms: the flag or config line that does it, when the script has one.

The agent records how the script is configured (``injected.json``'s ``config``: :mod:`stepwise_agent.inject.config`).
A fix declares its knobs (:mod:`advisors.fixes`); each convention, one module here, maps a knob onto the script's own
switch (:data:`CONVENTIONS`, tried in that order by :func:`knob_change`):

- ``HfArgumentParser`` (Hugging Face's example scripts): the ``TrainingArguments`` field of the knob
  (:data:`stepwise_agent.switches.HF_FIELDS`: ``--bf16``, ``--dataloader_num_workers N``, ``--torch_compile``),
  on the command line, or as the key of the JSON or YAML config file the script read (``parse_json_file``,
  ``parse_yaml_file``: ``"bf16": true``, ``bf16: true``);
- LightningCLI / jsonargparse: ``--trainer.precision bf16-mixed``; ``--data.num_workers N`` (or a ``model.*``
  one) where that ``__init__`` parameter reaches a ``DataLoader``'s ``num_workers`` in its class;
  ``--model.compile true`` where it reaches a ``torch.compile`` call in the model (else compile stays injected);
  or the line of the ``--config`` file the command gives (``trainer: precision:``, ``data: num_workers:``);
- ``accelerate launch``: ``--mixed_precision bf16`` / ``--dynamo_backend inductor`` among the launcher's options,
  when the script's own ``Accelerator(...)`` takes no such argument (what the launcher passes is what it then
  holds); workers have no launcher option: the script's own flag, or injection;
- nanoGPT's ``configurator.py`` globals: ``--compile=True``; ``--dtype=bfloat16`` only where the script's own
  autocast context is live on this device (nanoGPT's ``ctx`` is a ``nullcontext`` on a CPU);
- a Hydra job: a ``key=value`` override (``amp=true``, ``data.workers=4``) of a key of the composed config, matched
  like an argparse flag: by its name and by where its value reaches in the script (``enabled=cfg.amp``); or
  ``trainer.precision=bf16-mixed`` where that key reaches a Lightning ``Trainer`` (``precision=cfg.trainer.precision``
  or ``Trainer(**cfg.trainer)``);
- a plain ``argparse`` flag, matched by its name *and* by where its value reaches in the script's source
  (:func:`reaches`): ``--amp``'s value in a ``torch.autocast(...)`` (whose dtype must be the fix's), or a
  ``--precision`` whose choices hold the fix's (``bf16``); ``--workers``' in a ``DataLoader``'s ``num_workers``,
  ``--compile``'s guarding a ``torch.compile`` call; and the loop's own knobs, which no injection can turn:
  ``--grad-accum-steps`` guarding the optimizer's step (with the batch flag, so a step keeps its samples),
  ``--activation-checkpointing`` guarding a checkpointing call, ``--ddp-no-sync`` choosing ``no_sync()``,
  ``--cuda-graphs`` guarding ``torch.compile``, ``--batch-size`` reaching the ``DataLoader``'s ``batch_size``.
  Without a ``--cuda-graphs`` flag, CUDA graphs are ``--compile`` with ``--compile_mode reduce-overhead`` where
  that option reaches the same call (HF: ``--torch_compile --torch_compile_mode reduce-overhead``).

The patched arm is then the user's command with that flag (or a copy of the config file with that line) changed:
nothing is injected; the agent checks the knob's effect (``observe``). A knob the flag cannot set (a workers fix's
``persistent_workers``) is left out of that arm. The user's files are never written: a changed config file is a
copy in Stepwise's temporary folder, named like the original.
"""

from __future__ import annotations

from typing import Any, Mapping

from advisors.fixes.conventions import (
    accelerate,
    argparse_flags,
    configurator,
    hf,
    hydra,
    lightning_cli,
)
from advisors.fixes.conventions.editing import KnobChange

CONVENTIONS = {
    "hf": "HfArgumentParser: the TrainingArguments field, on the command line or in its JSON/YAML file",
    "lightning_cli": "LightningCLI: --trainer.precision, or an option of the model's or data module's whose value "
    "reaches the call (--data.num_workers), or its line in the --config file",
    "accelerate": "accelerate launch: --mixed_precision or --dynamo_backend, which the script's Accelerator() reads",
    "configurator": "nanoGPT configurator.py: --key=value over the script's global",
    "hydra": "Hydra: a key=value override of a config key whose value reaches the call that does it",
    "argparse": "argparse: a flag named for the knob whose value reaches the call that does it",
}


def knob_change(
    knobs: Mapping[str, Any],
    config: Mapping[str, Any] | None,
    command: tuple[str, ...],
    cwd: str,
    proof: str,
) -> KnobChange | None:
    """``knobs`` (a fix's) as the script's own flag or config line, or ``None`` when it has none for them."""
    if not config or not knobs:
        return None
    for fn in (
        hf.change,
        lightning_cli.change,
        accelerate.change,
        configurator.change,
        hydra.change,
        argparse_flags.change,
    ):
        out = fn(dict(knobs), config, tuple(command), cwd, proof)
        if out is not None:
            return out
    return None
