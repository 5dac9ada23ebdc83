"""A fix in the script's own terms: the flag or config line that does it, when the script has one.

The agent records how the script is configured (``injected.json``'s ``config``: :mod:`stepwise_agent.inject.config`).
A fix maps to a knob per convention (:data:`CONVENTIONS`):

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

import ast
import difflib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from advisors.fixes.base import Times
from advisors.experiments.config_text import json_with, key_line, yaml_data, yaml_line, yaml_scalar, yaml_with
from advisors.script_reach import lightning_reaches, reaches
from stepwise_agent.switches import ACCELERATE_PRECISION, HF_FIELDS, LIGHTNING_PRECISION

#: knob -> (flag names a plain argparse script gives it, where its value must reach)
ARGPARSE_NAMES: dict[str, tuple[tuple[str, ...], str]] = {
    "autocast": (("amp", "bf16", "use_amp", "autocast", "mixed_precision", "use_bf16", "mixed", "precision",
                  "amp_dtype"), "autocast"),
    "num_workers": (("workers", "num_workers", "n_workers", "dataloader_workers", "loader_workers", "j"),
                    "dataloader"),
    "compile": (("compile", "torch_compile", "use_compile"), "compile"),
    # the loop's own knobs, which no injection can turn (a fix's ``own_flag``: advisors.fixes)
    "grad_accum_steps": (("grad_accum_steps", "gradient_accumulation_steps", "accumulation_steps", "accum_steps",
                          "grad_accum", "accum_iter", "accumulate_grad_batches"), "accumulate"),
    "activation_checkpointing": (("activation_checkpointing", "checkpointing", "grad_checkpointing",
                                  "gradient_checkpointing", "checkpoint_activations"), "checkpoint"),
    "ddp_no_sync": (("ddp_no_sync", "no_sync"), "no_sync"),
    "cuda_graphs": (("cuda_graphs", "cudagraphs", "cuda_graph", "use_cuda_graphs"), "compile"),
    "batch_size": (("batch_size", "batch", "bs", "train_batch_size"), "batch"),
    "compile_mode": (("compile_mode", "torch_compile_mode"), "compile"),  # CUDA graphs: mode="reduce-overhead"
}
#: an autocast flag with choices (``--precision {fp32,bf16,fp16}``): the choice that asks for the fix's dtype
PRECISION_WORDS = {"bf16": ("bf16", "bfloat16", "bf16-mixed"), "fp16": ("fp16", "float16", "half", "16-mixed")}
#: knobs of a fix that only tune its main knob: left out when the script's flag cannot set them
SECONDARY = ("persistent_workers", "prefetch_factor", "pin_memory")
CONVENTIONS = {
    "hf": "HfArgumentParser: the TrainingArguments field, on the command line or in its JSON/YAML file",
    "lightning_cli": "LightningCLI: --trainer.precision, or an option of the model's or data module's whose value "
                     "reaches the call (--data.num_workers), or its line in the --config file",
    "accelerate": "accelerate launch: --mixed_precision or --dynamo_backend, which the script's Accelerator() reads",
    "configurator": "nanoGPT configurator.py: --key=value over the script's global",
    "hydra": "Hydra: a key=value override of a config key whose value reaches the call that does it",
    "argparse": "argparse: a flag named for the knob whose value reaches the call that does it",
}
CONFIG_DIR = Path(tempfile.gettempdir()) / "stepwise-configs"
BOOL_WORDS = ("true", "false", "yes", "no", "1", "0", "t", "f", "y", "n")


@dataclass(frozen=True)
class KnobChange:
    """``command``: the user's command with the change; ``observe``: the knobs it is expected to produce (the
    agent checks them, nothing is injected); ``convention`` (a key of :data:`CONVENTIONS`); ``flags``: the
    change as typed (``--bf16``, ``"bf16": true``); ``file``/``line``: where the knob is defined (the parser's
    call, the config file's key)."""

    command: tuple[str, ...]
    observe: dict[str, Any]
    convention: str
    flags: tuple[str, ...]
    file: str | None = None
    line: int | None = None
    config: tuple[str, str] | None = None  # (the user's config file, the changed copy run instead)
    extra: dict[str, Any] = field(default_factory=dict)

    def where(self) -> dict[str, Any] | None:
        if self.file is None:
            return None
        site = {"file": self.file, "line": self.line or 1, "code": " ".join(self.flags)}
        return {**site, "target": "command", "all": [site]}


def knob_change(knobs: Mapping[str, Any], config: Mapping[str, Any] | None, command: tuple[str, ...],
                cwd: str, proof: str) -> KnobChange | None:
    """``knobs`` (a fix's) as the script's own flag or config line, or ``None`` when it has none for them."""
    if not config or not knobs:
        return None
    for fn in (_hf, _lightning_cli, _accelerate, _configurator, _hydra, _argparse):
        out = fn(dict(knobs), config, tuple(command), cwd, proof)
        if out is not None:
            return out
    return None


# -- command lines --------------------------------------------------------------------------------------------
def with_flag(command: tuple[str, ...], flags: list[str], value: str | None, equals: bool = False) -> tuple[str, ...]:
    """``command`` with the option ``flags`` set to ``value`` (``None``: a switch without value); an existing
    occurrence is replaced in place, else the option is appended."""
    out = list(command)
    for i, a in enumerate(out):
        name = a.split("=", 1)[0]
        if name not in flags:
            continue
        if value is None and i + 1 < len(out) and out[i + 1].lower() in BOOL_WORDS:  # HF's ``--bf16 false``
            out[i + 1] = "true"
        elif "=" in a or equals:
            out[i] = name if value is None else f"{name}={value}"
        elif value is not None and i + 1 < len(out) and not out[i + 1].startswith("-"):
            out[i + 1] = value
        elif value is not None:
            out.insert(i + 1, value)
        return tuple(out)
    flag = max(flags, key=len)
    if value is None:
        return (*out, flag)
    return (*out, f"{flag}={value}") if equals else (*out, flag, value)


def _option(parser: Mapping[str, Any], dest: str) -> dict[str, Any] | None:
    return next((o for o in parser.get("options") or [] if o.get("dest") == dest and o.get("flags")), None)


def _site(parser: Mapping[str, Any]) -> tuple[str | None, int | None]:
    site = parser.get("site") or {}
    return site.get("file"), site.get("line")


# -- Hugging Face ---------------------------------------------------------------------------------------------
def _hf_fields(knobs: Mapping[str, Any]) -> dict[str, Any] | None:
    fields: dict[str, Any] = {}
    for knob, value in knobs.items():
        if knob not in HF_FIELDS or knob == "matmul_precision" or (knob == "autocast" and value != "bf16"):
            return None
        fields.update({f: v for f, v in HF_FIELDS[knob](value).items() if not (knob == "autocast" and v is False)})
    return fields


def _hf(knobs: dict[str, Any], config: Mapping[str, Any], command: tuple[str, ...], cwd: str,
        proof: str) -> KnobChange | None:
    parsers = [p for p in config.get("parsers") or [] if p.get("class") == "HfArgumentParser"]
    files = [f for f in config.get("files") or [] if f.get("class") == "HfArgumentParser"]
    fields = _hf_fields(knobs)
    if fields is None:
        return None
    if files:
        return _hf_file(knobs, fields, files[0], command, cwd)
    if not parsers:
        return None
    parser = parsers[0]
    new, typed = command, []
    for name, value in fields.items():
        opt = _option(parser, name)
        if opt is None:
            return None
        text = None if value is True else str(value).lower() if isinstance(value, bool) else str(value)
        new = with_flag(new, list(opt["flags"]), text)
        typed.append(max(opt["flags"], key=len) + ("" if text is None else f" {text}"))
    file, line = _site(parser)
    return KnobChange(new, knobs, "hf", tuple(typed), file, line)


def _hf_file(knobs: dict[str, Any], fields: dict[str, Any], entry: Mapping[str, Any], command: tuple[str, ...],
             cwd: str) -> KnobChange | None:
    path = str(entry.get("file") or "")
    if any(f not in (entry.get("fields") or []) for f in fields):
        return None
    if path.endswith(".json"):
        return json_change(knobs, "hf", command, cwd, path, fields)
    if path.endswith((".yaml", ".yml")):
        return _yaml_change(knobs, "hf", command, cwd, path, fields)
    return None


def json_change(knobs: Mapping[str, Any], convention: str, command: tuple[str, ...], cwd: str, path: str,
                fields: Mapping[str, Any], observe: Mapping[str, Any] | None = None) -> KnobChange | None:
    """The user's command with its JSON config file ``path`` (an object) replaced by a copy holding ``fields``."""
    try:
        original = Path(path).read_text(encoding="utf-8")
        data = json.loads(original)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    typed = tuple(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in fields.items())
    return config_copy(knobs, convention, command, cwd, path, json_with(original, fields), typed,
                       key_line(path, next(iter(fields))), observe)


def config_copy(knobs: Mapping[str, Any], convention: str, command: tuple[str, ...], cwd: str, path: str,
                text: str, typed: tuple[str, ...], line: int, observe: Mapping[str, Any] | None = None,
                names: tuple[str, ...] = ()) -> KnobChange | None:
    """The user's command with its config file ``path`` (an argument of it, or the value of one of the options
    ``names``: ``--config cfg.yaml``, ``--config=cfg.yaml``) replaced by a copy holding ``text``, written in
    Stepwise's temporary folder under the same name (the user's file is never written)."""
    index = config_argument(command, cwd, path)
    if index is None:
        return None
    copy = CONFIG_DIR / hashlib.sha256(text.encode()).hexdigest()[:16] / Path(path).name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(text, encoding="utf-8")
    arg = command[index]
    value = f"{arg.split('=', 1)[0]}={copy}" if arg.startswith("-") and "=" in arg else str(copy)
    new = (*command[:index], value, *command[index + 1:])
    return KnobChange(new, dict(observe if observe is not None else knobs), convention, typed, path, line,
                      (path, str(copy)))


def config_argument(command: tuple[str, ...], cwd: str, path: str) -> int | None:
    """Where in ``command`` the config file ``path`` is named: a positional argument or ``--opt=PATH``."""
    for i, a in enumerate(command):
        value = a.split("=", 1)[1] if a.startswith("-") and "=" in a else a
        if value and os.path.abspath(os.path.join(cwd, value)) == path:
            return i
    return None


def _yaml_change(knobs: Mapping[str, Any], convention: str, command: tuple[str, ...], cwd: str, path: str,
                 fields: Mapping[str, Any], observe: Mapping[str, Any] | None = None) -> KnobChange | None:
    try:
        original = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    edited = yaml_with(original, fields)
    if edited is None:
        return None
    text, line = edited
    typed = tuple(f"{k.rsplit('.', 1)[-1]}: {yaml_scalar(v)}" for k, v in fields.items())
    return config_copy(knobs, convention, command, cwd, path, text, typed, line, observe)


# -- LightningCLI, accelerate launch -------------------------------------------------------------------------
def _lightning_cli(knobs: dict[str, Any], config: Mapping[str, Any], command: tuple[str, ...], cwd: str,
                   proof: str) -> KnobChange | None:
    """LightningCLI builds ``L.Trainer`` from its parser's ``trainer.*`` options: the precision is
    ``--trainer.precision`` — or, when the command's ``--config`` file holds a ``trainer:`` section and the flag is
    not typed, that file's ``trainer: precision:`` line (in a copy). The workers and compile fixes: an option of the
    model's or data module's own (``--data.num_workers``, ``--model.compile``), named for the knob, whose
    ``__init__`` parameter demonstrably reaches the call in that class
    (:func:`~advisors.script_reach.lightning_reaches`:
    a ``DataLoader``'s ``num_workers``; a ``torch.compile`` call, or an ``if`` around one — a model that never
    calls it has no option for it, and the fix stays injected)."""
    if set(knobs) == {"autocast"} and knobs["autocast"] in LIGHTNING_PRECISION:
        parser = next((p for p in config.get("parsers") or [] if _option(p, "trainer.precision")), None)
        if parser is None:
            return None
        return _cli_change(knobs, knobs, config, command, cwd, parser, "trainer.precision",
                           LIGHTNING_PRECISION[knobs["autocast"]])
    main = {k: v for k, v in knobs.items() if k not in SECONDARY or k == proof}
    if set(main) not in ({"num_workers"}, {"compile"}) or proof not in main:
        return None
    knob, value = next(iter(main.items()))
    names, where = ARGPARSE_NAMES[knob]
    for parser in config.get("parsers") or []:
        file, _ = _site(parser)
        if parser.get("library") != "jsonargparse" or not file:
            continue
        flows = lightning_reaches(file)
        for opt in parser.get("options") or []:
            section, _, name = str(opt.get("dest")).partition(".")
            held = opt.get("value", opt.get("default"))
            if name not in names or name not in flows.get(section, {}).get(where, set()) or \
                    (knob == "compile" and (section != "model" or not isinstance(held, bool) or not value)) or \
                    (knob == "num_workers" and (not isinstance(held, int) or isinstance(held, bool))):
                continue
            return _cli_change(main, main, config, command, cwd, parser, str(opt["dest"]),
                               "true" if knob == "compile" else str(int(value)),
                               True if knob == "compile" else int(value))
    return None


def _cli_change(knobs: Mapping[str, Any], observe: Mapping[str, Any], config: Mapping[str, Any],
                command: tuple[str, ...], cwd: str, parser: Mapping[str, Any], dest: str, text: str,
                value: Any = None) -> KnobChange | None:
    """LightningCLI's option ``dest`` (``trainer.precision``) set to ``text``: the flag (``--trainer.precision
    bf16-mixed``), changed in place when typed; else, when the command's ``--config`` YAML file holds that
    section, its line in a copy."""
    flag = f"--{dest}"
    if not any(a.split("=", 1)[0] == flag for a in command):
        for entry in config.get("files") or []:
            path = str(entry.get("file") or "")
            if entry.get("library") == "jsonargparse" and path.endswith((".yaml", ".yml")) and \
                    isinstance(yaml_data(path).get(dest.split(".", 1)[0]), dict):
                return _yaml_change(knobs, "lightning_cli", command, cwd, path,
                                    {dest: text if value is None else value}, observe)
    file, line = _site(parser)
    return KnobChange(with_flag(command, [flag], text), dict(observe), "lightning_cli", (f"{flag} {text}",), file, line)


def _accelerate(knobs: dict[str, Any], config: Mapping[str, Any], command: tuple[str, ...], cwd: str,
                proof: str) -> KnobChange | None:
    """``accelerate launch``'s own options (before the script), which it passes to the script's ``Accelerator()``
    (``ACCELERATE_MIXED_PRECISION``, ``ACCELERATE_DYNAMO_BACKEND`` in its environment): ``--mixed_precision bf16``,
    when that ``Accelerator(...)`` takes no precision of its own; ``--dynamo_backend inductor`` for compile, when it
    takes no ``dynamo_backend``/``dynamo_plugin`` of its own (``prepare()`` then ``torch.compile``s the model).
    Workers have no launcher option (the DataLoader is the script's own): they map to the script's flag if it has
    one (:func:`_argparse`), else stay injected."""
    if len(command) < 3 or os.path.basename(command[0]) != "accelerate" or command[1] != "launch":
        return None
    acc = (config.get("frameworks") or {}).get("accelerate") or {}
    asked = acc.get("asked") or {}
    if set(knobs) == {"autocast"} and knobs["autocast"] in ACCELERATE_PRECISION:
        if not acc or asked.get("mixed_precision") is not None:
            return None  # no Accelerator of the user's, or one whose own argument decides
        option, value = "--mixed_precision", ACCELERATE_PRECISION[knobs["autocast"]]
    elif set(knobs) == {"compile"} and knobs["compile"]:
        if "dynamo_backend" not in asked or asked["dynamo_backend"] is not None or asked.get("dynamo_plugin"):
            return None  # not recorded, or the script's own Accelerator(dynamo_...) decides
        option, value = "--dynamo_backend", "inductor"
    else:
        return None
    at = next((i for i, a in enumerate(command) if i > 1 and a.endswith(".py") and not a.startswith("-")), None)
    if at is None:
        return None
    head = with_flag(command[:at], [option], value)
    if head[-2:] == (option, value) and len(head) > at:  # new: typed first, as the docs write it
        head = (*command[:2], option, value, *command[2:at])
    file, line = _site({"site": acc.get("at")})  # the user's Accelerator(...) call
    return KnobChange((*head, *command[at:]), knobs, "accelerate", (f"{option} {value}",), file, line)


def _configurator(knobs: dict[str, Any], config: Mapping[str, Any], command: tuple[str, ...], cwd: str,
                  proof: str) -> KnobChange | None:
    glob = config.get("globals") or {}
    script = config.get("script")
    if not glob or not script:
        return None
    if set(knobs) == {"compile"} and isinstance(glob.get("compile"), bool):
        key, value = "compile", "True"
    elif set(knobs) == {"autocast"} and isinstance(glob.get("dtype"), str) and knobs["autocast"] == "bf16" and \
            any(a.get("enabled") and a.get("site", {}).get("file") == script for a in config.get("autocast") or []):
        key, value = "dtype", "bfloat16"  # the script's own autocast context is live here
    else:
        return None
    return KnobChange(with_flag(command, [f"--{key}"], value, equals=True), knobs, "configurator",
                      (f"--{key}={value}",), script, _global_line(script, key))


def _global_line(script: str, key: str) -> int:
    try:
        tree = ast.parse(Path(script).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return 1
    return next((n.lineno for n in tree.body if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == key for t in n.targets)), 1)


# -- Hydra ---------------------------------------------------------------------------------------------------
def _hydra(knobs: dict[str, Any], config: Mapping[str, Any], command: tuple[str, ...], cwd: str,
           proof: str) -> KnobChange | None:
    """A Hydra job: a ``key=value`` override of a key of its composed config whose name fits the knob and whose
    value reaches the call that does it in the script (``enabled=cfg.amp``, ``num_workers=cfg.data.workers``),
    as for an argparse flag; the ``where`` is that key's line in the primary config file."""
    job = config.get("hydra") or {}
    script = config.get("script")
    main = {k: v for k, v in knobs.items() if k not in SECONDARY or k == proof}
    if not job or not script or proof not in main:
        return None
    reach = reaches(str(script))
    values = job.get("values") or {}
    if set(main) == {"autocast"} and main["autocast"] in LIGHTNING_PRECISION:  # a Lightning Trainer's precision
        key = next((k for k, v in values.items() if _reaches_trainer_precision(k, v, reach)), None)
        if key is not None:
            text = LIGHTNING_PRECISION[main["autocast"]]
            return KnobChange(with_override(command, key, text), main, "hydra", (f"{key}={text}",),
                              job.get("file") or script, yaml_line(job["file"], key) if job.get("file") else None)
    if any(k not in ARGPARSE_NAMES for k in main):
        return None
    new, typed = command, []
    for knob, value in main.items():
        key = next((k for k, v in values.items() if _hydra_fits(knob, value, k, v, reach, config)), None)
        if key is None:
            return None
        text = "true" if isinstance(values[key], bool) else str(value)  # a switch: on
        new = with_override(new, key, text)
        typed.append(f"{key}={text}")
    file = job.get("file")
    return KnobChange(new, {k: main[k] for k in main}, "hydra", tuple(typed), file or script,
                      yaml_line(file, typed[0].split("=", 1)[0]) if file else (job.get("site") or {}).get("line"))


def _reaches_trainer_precision(key: str, held: Any, reach: Mapping[str, set[str]]) -> bool:
    """``trainer.precision`` reaches ``L.Trainer(precision=cfg.trainer.precision)`` or ``L.Trainer(**cfg.trainer)``."""
    if not key.endswith("precision") or not (held is None or isinstance(held, (str, int))):
        return False
    return key in reach.get("precision", set()) or \
        (key.endswith(".precision") and key.rsplit(".", 1)[0] in reach.get("trainer", set()))


def _hydra_fits(knob: str, value: Any, key: str, held: Any, reach: Mapping[str, set[str]],
                config: Mapping[str, Any]) -> bool:
    names, where = ARGPARSE_NAMES[knob]
    parts = key.split(".")
    if parts[-1] not in names or not set(parts) <= reach.get(where, set()):
        return False
    if knob == "num_workers":
        return isinstance(held, int) and not isinstance(held, bool)
    if knob == "compile_mode":
        return held is None or isinstance(held, str)
    if not isinstance(held, bool):
        return False
    if knob == "autocast":  # the script's own autocast must be of the fix's precision
        want = {"bf16": "bfloat16", "fp16": "float16"}.get(str(value))
        return any(a.get("dtype") == want for a in config.get("autocast") or [])
    return bool(value)


def with_override(command: tuple[str, ...], key: str, value: str) -> tuple[str, ...]:
    """``command`` with the Hydra override ``key=value``: one already typed (``key=``, ``+key=``, ``++key=``)
    changed in place, else appended."""
    for i, a in enumerate(command):
        name = a.split("=", 1)[0]
        if "=" in a and not a.startswith("-") and name.lstrip("+") == key:
            return (*command[:i], f"{name}={value}", *command[i + 1:])
    return (*command, f"{key}={value}")


# -- plain argparse -------------------------------------------------------------------------------------------
def _argparse(knobs: dict[str, Any], config: Mapping[str, Any], command: tuple[str, ...], cwd: str,
              proof: str) -> KnobChange | None:
    """A flag per knob, named for it and whose value reaches the call that does it (:func:`_named`); a knob
    :class:`Times` the script's own value is resolved against what the flag holds, and a change of the step's shape
    keeps what the fix means by it (:func:`_step_shape`)."""
    main = {k: v for k, v in knobs.items() if k not in SECONDARY or k == proof}
    if proof not in main or any(k not in ARGPARSE_NAMES for k in main):
        return None
    for parser in config.get("parsers") or []:
        file, line = _site(parser)
        if not file or parser.get("class") == "HfArgumentParser":
            continue
        reach = reaches(file)
        opts = {knob: _named(parser, knob, reach) for knob in main}
        if any(o is None for o in opts.values()):
            continue
        shaped = _step_shape(main, parser, reach)
        if shaped is None:
            continue
        values, observe = shaped
        found = {k: opts.get(k) or _named(parser, k, reach) for k in values}
        chosen = {k: o for k, o in found.items() if o is not None}
        if len(chosen) < len(values) or not all(_fits(k, values[k], o, config) for k, o in chosen.items()):
            continue
        new, typed = command, []
        for knob, value in values.items():
            opt = chosen[knob]
            text = _flag_text(knob, value, opt)
            new = with_flag(new, list(opt["flags"]), text)
            typed.append(max(opt["flags"], key=len) + ("" if text is None else f" {text}"))
        return KnobChange(new, observe, "argparse", tuple(typed), file, line)
    return None


def _step_shape(main: Mapping[str, Any], parser: Mapping[str, Any], reach: Mapping[str, set[str]]
                ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(flag values, what the run must show)`` of ``main``'s knobs, with :class:`Times` values resolved.

    ``grad_accum_steps`` and ``batch_size`` ask for a step's shape: samples per optimizer step × the batch factor,
    in micro-batches × the accumulation factor. A script whose batch flag already counts the whole step (its value
    is divided by the accumulation flag on its way to the ``DataLoader``: ``batch_size=args.batch // args.accum``)
    takes the new step's samples on that flag; one whose batch flag is the micro-batch (accumulation multiplies it,
    as Hugging Face's does) takes the step's samples ÷ the micro-batches. ``None`` when the flags cannot hold it
    (no batch flag to keep the step's samples, a micro-batch that would not be whole)."""
    plain = {k: v for k, v in main.items() if not isinstance(v, Times)}
    fa, fb = main.get("grad_accum_steps"), main.get("batch_size")
    if not isinstance(fa, Times) and not isinstance(fb, Times):
        return plain, dict(plain)
    a_opt, b_opt = _named(parser, "grad_accum_steps", reach), _named(parser, "batch_size", reach)
    accum = _held(a_opt) if a_opt is not None else 1
    batch = _held(b_opt) if b_opt is not None else None
    if accum is None or accum < 1 or batch is None or batch < 1:
        return None
    split = a_opt is not None and a_opt.get("dest") in reach.get("batch", set())
    samples = (batch if split else batch * accum) * (fb.factor if isinstance(fb, Times) else 1)
    accum2 = accum * (fa.factor if isinstance(fa, Times) else 1)
    if samples % accum2:
        return None
    flags = dict(plain)
    if accum2 != accum:
        flags["grad_accum_steps"] = accum2
    batch2 = samples if split else samples // accum2
    if batch2 != batch:
        flags["batch_size"] = batch2
    observe = {**plain, **({"grad_accum_steps": accum2} if "grad_accum_steps" in main else {}),
               "batch_size": samples // accum2}  # the training loader's batch: one micro-batch
    return flags, observe


def _held(opt: Mapping[str, Any]) -> int | None:
    value = opt.get("value", opt.get("default"))
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _named(parser: Mapping[str, Any], knob: str, reach: Mapping[str, set[str]]) -> dict[str, Any] | None:
    names, where = ARGPARSE_NAMES[knob]
    for opt in parser.get("options") or []:
        flags = [f.lstrip("-").replace("-", "_") for f in opt.get("flags") or []]
        if opt.get("dest") in reach.get(where, set()) and (opt.get("dest") in names or set(flags) & set(names)):
            return opt
    return None


def _precision_choice(value: Any, opt: Mapping[str, Any]) -> str | None:
    """The choice of an autocast option with choices that asks for ``value``'s dtype (``bf16``, ``bfloat16``)."""
    words = PRECISION_WORDS.get(str(value), ())
    return next((str(c) for c in opt.get("choices") or [] if str(c).lower() in words), None)


def _fits(knob: str, value: Any, opt: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
    if knob in ("num_workers", "grad_accum_steps", "batch_size"):
        return opt.get("action") == "store" and opt.get("type") == "int"
    if knob == "autocast" and opt.get("action") == "store" and opt.get("choices"):
        return _precision_choice(value, opt) is not None  # the flag picks the dtype itself
    if knob == "compile_mode":  # a string option whose value reaches torch.compile (its mode=)
        return opt.get("action") == "store" and opt.get("type") in (None, "str")
    if opt.get("action") != "store_true":
        return False
    if knob == "autocast":  # the script's own autocast must be of the fix's precision
        want = {"bf16": "bfloat16", "fp16": "float16"}.get(str(value))
        return any(a.get("dtype") == want for a in config.get("autocast") or [])
    return bool(value)


def _flag_text(knob: str, value: Any, opt: Mapping[str, Any]) -> str | None:
    """What follows the flag: nothing for a switch, the choice for a precision, else the value."""
    if opt.get("action") == "store_true":
        return None
    if knob == "autocast":
        return _precision_choice(value, opt)
    return str(value)


# -- what the change reads as --------------------------------------------------------------------------------
def command_text(command: tuple[str, ...] | list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(str(c)) for c in command)


def shown_change(before: tuple[str, ...], after: tuple[str, ...]) -> dict[str, Any]:
    """The change between two commands of one script: the config file's diff when the commands differ only by a
    changed copy of it (the user's file named), else the command line before and after."""
    differ = [(a, b) for a, b in zip(before, after) if a != b]
    if len(before) == len(after) and len(differ) == 1 and Path(differ[0][1]).parent.parent == CONFIG_DIR:
        old, new = differ[0]
        try:
            a = Path(old).read_text(encoding="utf-8").splitlines(keepends=True)
            b = Path(new).read_text(encoding="utf-8").splitlines(keepends=True)
        except OSError:
            a = b = []
        name = Path(new).name
        user = old if Path(old).parent.parent != CONFIG_DIR else name
        text = "".join(difflib.unified_diff(a, b, f"a/{name}", f"b/{name}", n=2))
        return {"kind": "config", "file": user, "line": None, "text": text, "sites": []}
    return {"kind": "command", "file": None, "line": None,
            "text": f"- {command_text(before)}\n+ {command_text(after)}\n", "sites": []}


def command_evidence(before: tuple[str, ...], after: tuple[str, ...]) -> str:
    """What the patched arm ran, in one line: the user's command with the flags added or changed, or with the
    config file's lines changed."""
    shown = shown_change(before, after)
    if shown["kind"] == "config":
        lines = [x[1:].strip().rstrip(",") for x in shown["text"].splitlines()
                 if x.startswith("+") and not x.startswith("+++")]
        return f"ran your own command with {Path(str(shown['file'])).name} changed: {', '.join(lines)}"
    added: list[str] = []  # each changed or added argument, with the option it is the value of
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            option = after[j1 - 1] if tag == "replace" and j1 and after[j1 - 1].startswith("-") and \
                "=" not in after[j1] else None  # a value changed in place: named with its option
            added.extend(([option] if option and option not in added[-1:] else []) + list(after[j1:j2]))
    return f"ran your own command with {command_text(added)} (nothing injected)"
