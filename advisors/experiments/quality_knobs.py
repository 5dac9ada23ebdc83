"""Time-to-quality arms in the script's own terms: batch × k with its rate, or accumulation × k with its rate,
as the flags or config lines the script already has.

A convergence candidate (:mod:`advisors.quality.script_candidates`) is injected at boot unless the script exposes
the numbers it changes as its own knobs; then the arm is the user's command with them changed, nothing injected:

- ``HfArgumentParser``: ``--per_device_train_batch_size``, ``--learning_rate``, ``--gradient_accumulation_steps``
  and, when the rate grows enough to want one and the script has no warm-up of its own, ``--warmup_steps`` — on
  the command line, or as the keys of the JSON/YAML file it read (a changed copy; a key the file does not hold is
  not guessed, except ``warmup_steps``/``warmup_ratio``, whose ``TrainingArguments`` default is 0);
- LightningCLI / jsonargparse: ``--trainer.accumulate_grad_batches``, and an option such as ``--data.batch_size``
  or ``--model.lr`` whose last name fits and whose value reaches, in the script, a ``DataLoader``'s
  ``batch_size`` or a ``torch.optim`` optimizer's ``lr`` (:func:`~advisors.script_reach.reaches`),
  typed after the ``--config`` file (jsonargparse applies it last);
- a plain ``argparse`` script: a ``--batch-size``-like flag (int) whose value reaches a ``DataLoader``'s
  ``batch_size`` together with an ``--lr``-like flag (float) whose value reaches an optimizer's ``lr``.

The batch and the rate change together or not at all (the rate rule is the candidate's: √k for the Adam family,
k for SGD-like). The run is given what the changed command asks for as observed knobs (``batch_size``, ``lr``,
``accumulation_steps``, ``warmup_steps``; :mod:`stepwise_agent.inject.convergence`): the agent checks that the
training loader yields that batch and that the optimizer is built with that rate, so a flag that does not reach
them reads "not applied", never a measured arm.

Left to injection, on purpose: a warm-up that the script's flags cannot express (an argparse or LightningCLI
script: no flag is known to reach its scheduler) — the whole arm is then injected, and its rule says why, rather
than half a change through flags and half injected; accumulation in a plain argparse script (its loop is its own:
no flag is a known accumulation); nanoGPT's configurator globals and Hydra keys (``batch_size``,
``learning_rate``): nanoGPT makes its batches without a ``DataLoader``, so the agent could not check the batch it
trained on.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from advisors.fixes.conventions.config_text import yaml_data
from advisors.fixes.conventions.editing import KnobChange, json_change, with_flag
from advisors.fixes.conventions.editing import site_of as _site, yaml_change as _yaml_change
from advisors.script_reach import reaches
from advisors.quality.candidates import Candidate
from advisors.quality.script_candidates import Baseline
from profilers.run.script_spec import ScriptSpec

BATCH_NAMES = ("batch_size", "batch", "bs", "train_batch_size", "batch_size_per_device", "b")
LR_NAMES = ("lr", "learning_rate", "base_lr")
HF_BATCH, HF_LR, HF_ACCUM = (
    "per_device_train_batch_size",
    "learning_rate",
    "gradient_accumulation_steps",
)
#: why a candidate stays injected although the script has flags (said in its rule)
NO_WARMUP_FLAG = (
    "the warm-up cannot be given through the script's own flags (none is known to reach its "
    "scheduler): the whole arm is injected"
)


def number(value: float) -> str:
    """A rate as typed on a command line: the shortest text that reads back as the same float."""
    text = f"{value:.6g}"
    return text if float(text) == value else repr(value)


def quality_change(
    patch: Mapping[str, Any],
    config: Mapping[str, Any] | None,
    command: tuple[str, ...],
    cwd: str,
    batch: int | None,
) -> KnobChange | None:
    """The candidate ``patch`` (``batch_scale``/``grad_accum`` k, ``lr_scale`` s, ``warmup_steps``) as the
    script's own flags or config lines, or ``None``: injected. ``batch``: the batch the baseline trained on."""
    if not config or "lr_scale" not in patch or not ({"batch_scale", "grad_accum"} & set(patch)):
        return None
    for fn in (_hf, _lightning_cli, _argparse):
        out = fn(patch, config, tuple(command), cwd, batch)
        if out is not None:
            return out
    return None


def why_injected(patch: Mapping[str, Any], config: Mapping[str, Any] | None) -> str | None:
    """Why a candidate with a warm-up stays injected on a script that has batch/rate flags of its own."""
    if patch.get("warmup_steps") and any(
        p.get("class") != "HfArgumentParser" for p in (config or {}).get("parsers") or []
    ):
        return NO_WARMUP_FLAG
    return None


def _observe(
    patch: Mapping[str, Any],
    batch: int | None,
    rate: float,
    new_batch: int | None,
    accum: int | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"lr": rate}
    if "batch_scale" in patch:
        out["batch_size"] = batch * int(patch["batch_scale"]) if batch else new_batch
    if accum is not None:
        out["accumulation_steps"] = accum
    return out


# -- Hugging Face ---------------------------------------------------------------------------------------------
def _hf_fields(patch: Mapping[str, Any], held: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``TrainingArguments`` fields to type, from the values the script holds (``None``: one is unknown)."""
    rate = held.get(HF_LR)
    if not isinstance(rate, (int, float)) or isinstance(rate, bool):
        return None
    field, knob = (HF_BATCH, "batch_scale") if "batch_scale" in patch else (HF_ACCUM, "grad_accum")
    value = held.get(field)
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    fields: dict[str, Any] = {
        field: value * int(patch[knob]),
        HF_LR: float(number(float(rate) * float(patch["lr_scale"]))),
    }
    if patch.get("warmup_steps") and not (held.get("warmup_steps") or held.get("warmup_ratio")):
        fields["warmup_steps"] = int(
            patch["warmup_steps"]
        )  # none of its own: Goyal et al.'s, as a flag
    return fields


def _hf_observe(
    patch: Mapping[str, Any], fields: Mapping[str, Any], batch: int | None
) -> dict[str, Any]:
    out = _observe(patch, batch, fields[HF_LR], fields.get(HF_BATCH), fields.get(HF_ACCUM))
    if "warmup_steps" in fields:
        out["warmup_steps"] = fields["warmup_steps"]
    return out


def _hf(
    patch: Mapping[str, Any],
    config: Mapping[str, Any],
    command: tuple[str, ...],
    cwd: str,
    batch: int | None,
) -> KnobChange | None:
    files = [f for f in config.get("files") or [] if f.get("class") == "HfArgumentParser"]
    if files:
        return _hf_file(patch, files[0], command, cwd, batch)
    parser = next(
        (p for p in config.get("parsers") or [] if p.get("class") == "HfArgumentParser"), None
    )
    if parser is None:
        return None
    options = {o["dest"]: o for o in parser.get("options") or [] if o.get("flags")}
    fields = _hf_fields(patch, {d: o.get("value") for d, o in options.items()})
    if fields is None or any(f not in options for f in fields):
        return None
    new, typed = command, []
    for name, value in fields.items():
        text = number(value) if isinstance(value, float) else str(value)
        new = with_flag(new, list(options[name]["flags"]), text)
        typed.append(f"{max(options[name]['flags'], key=len)} {text}")
    file, line = _site(parser)
    return KnobChange(new, _hf_observe(patch, fields, batch), "hf", tuple(typed), file, line)


def _hf_file(
    patch: Mapping[str, Any],
    entry: Mapping[str, Any],
    command: tuple[str, ...],
    cwd: str,
    batch: int | None,
) -> KnobChange | None:
    path = str(entry.get("file") or "")
    data: Any = None
    if path.endswith(".json"):
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return None
    elif path.endswith((".yaml", ".yml")):
        data = yaml_data(path)
    fields = _hf_fields(patch, data) if isinstance(data, dict) else None
    if fields is None:
        return None
    observe = _hf_observe(patch, fields, batch)
    change = json_change if path.endswith(".json") else _yaml_change
    return change(patch, "hf", command, cwd, path, fields, observe)


# -- LightningCLI and plain argparse: a flag named for the number, whose value reaches where it acts ----------
def _reaching(
    parser: Mapping[str, Any], names: tuple[str, ...], reach: set[str], kind: str
) -> dict[str, Any] | None:
    """The parser's option for a number (``kind``: ``int``/``float``) named one of ``names`` (its dest's last
    part, or a flag's) whose value reaches ``reach`` in the script."""
    for opt in parser.get("options") or []:
        dest = str(opt.get("dest") or "").rsplit(".", 1)[-1]
        flags = {f.lstrip("-").rsplit(".", 1)[-1].replace("-", "_") for f in opt.get("flags") or []}
        value = opt.get("value")
        typed = (
            opt.get("type") in (kind, None)
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
        )
        if kind == "int":
            typed = typed and isinstance(value, int)
        if typed and dest in reach and (dest in names or flags & set(names)):
            return opt
    return None


def _flags_change(
    patch: Mapping[str, Any],
    parser: Mapping[str, Any],
    command: tuple[str, ...],
    batch: int | None,
    convention: str,
    accum: dict[str, Any] | None,
) -> KnobChange | None:
    file, line = _site(parser)
    if not file:
        return None
    reach = reaches(file)
    rate_opt = _reaching(parser, LR_NAMES, reach["lr"], "float")
    if rate_opt is None:
        return None
    rate = float(number(float(rate_opt["value"]) * float(patch["lr_scale"])))
    changes: list[tuple[dict[str, Any], str]] = [(rate_opt, number(rate))]
    new_batch = new_accum = None
    if "batch_scale" in patch:
        batch_opt = _reaching(parser, BATCH_NAMES, reach["batch"], "int")
        if batch_opt is None:
            return None
        new_batch = int(batch_opt["value"]) * int(patch["batch_scale"])
        changes.insert(0, (batch_opt, str(new_batch)))
    elif accum is not None:
        new_accum = int(accum.get("value") or 1) * int(patch["grad_accum"])
        changes.insert(0, (accum, str(new_accum)))
    else:
        return None
    new, typed = command, []
    for opt, text in changes:
        new = with_flag(new, list(opt["flags"]), text)
        typed.append(f"{max(opt['flags'], key=len)} {text}")
    return KnobChange(
        new,
        _observe(patch, batch, rate, new_batch, new_accum),
        convention,
        tuple(typed),
        file,
        line,
    )


def _lightning_cli(
    patch: Mapping[str, Any],
    config: Mapping[str, Any],
    command: tuple[str, ...],
    cwd: str,
    batch: int | None,
) -> KnobChange | None:
    if patch.get("warmup_steps"):
        return None  # NO_WARMUP_FLAG
    for parser in config.get("parsers") or []:
        if parser.get("library") != "jsonargparse":
            continue
        accum = next(
            (
                o
                for o in parser.get("options") or []
                if o.get("dest") == "trainer.accumulate_grad_batches"
                and isinstance(o.get("value"), (int, type(None)))
                and o.get("flags")
            ),
            None,
        )
        out = _flags_change(patch, parser, command, batch, "lightning_cli", accum)
        if out is not None:
            return out
    return None


def _argparse(
    patch: Mapping[str, Any],
    config: Mapping[str, Any],
    command: tuple[str, ...],
    cwd: str,
    batch: int | None,
) -> KnobChange | None:
    if patch.get("warmup_steps") or "batch_scale" not in patch:
        return None  # NO_WARMUP_FLAG; accumulation is the script's loop, not a flag
    for parser in config.get("parsers") or []:
        if parser.get("class") == "HfArgumentParser" or parser.get("library") == "jsonargparse":
            continue
        out = _flags_change(patch, parser, command, batch, "argparse", None)
        if out is not None:
            return out
    return None


# -- the arm ----------------------------------------------------------------------------------------------------
def in_own_terms(cand: Candidate, base: Baseline | None, spec: ScriptSpec) -> Candidate:
    """``cand`` (resolved) with its rule saying how the arm runs: through the script's own flags, or injected and
    why (a warm-up no flag can give)."""
    if cand.patch is None or base is None:
        return cand
    change = quality_change(cand.patch, base.config, spec.command, spec.cwd, base.batch)
    if change is not None:
        return replace(
            cand,
            rule=f"{cand.rule}; through your own command: {', '.join(change.flags)} "
            "(nothing injected)",
        )
    why = why_injected(cand.patch, base.config)
    return replace(cand, rule=f"{cand.rule}; {why}") if why else cand


def quality_patched(spec: ScriptSpec, cand: Candidate, base: Baseline | None) -> ScriptSpec:
    """The arm of ``cand``: the user's command with its own flags or config lines changed (the values it now asks
    for observed), else the candidate's knobs injected."""
    patch = dict(cand.patch or {})
    change = (
        quality_change(patch, base.config, spec.command, spec.cwd, base.batch)
        if base is not None
        else None
    )
    if change is None:
        return spec.patch(inject=patch)
    return spec.patch(command=change.command, observe=change.observe)
