"""LightningCLI / jsonargparse: ``--trainer.precision bf16-mixed``, an option of the model's or data module's
whose value reaches the call (``--data.num_workers``), or its line in the ``--config`` file."""

from __future__ import annotations

from typing import Any, Mapping

from advisors.fixes.conventions.argparse_flags import ARGPARSE_NAMES
from advisors.fixes.conventions.config_text import yaml_data
from advisors.fixes.conventions.editing import (
    SECONDARY,
    KnobChange,
    option,
    site_of,
    with_flag,
    yaml_change,
)
from advisors.script_reach import lightning_reaches
from stepwise_agent.switches import LIGHTNING_PRECISION


def change(
    knobs: dict[str, Any], config: Mapping[str, Any], command: tuple[str, ...], cwd: str, proof: str
) -> KnobChange | None:
    """LightningCLI builds ``L.Trainer`` from its parser's ``trainer.*`` options: the precision is
    ``--trainer.precision`` — or, when the command's ``--config`` file holds a ``trainer:`` section and the flag is
    not typed, that file's ``trainer: precision:`` line (in a copy). The workers and compile fixes: an option of the
    model's or data module's own (``--data.num_workers``, ``--model.compile``), named for the knob, whose
    ``__init__`` parameter demonstrably reaches the call in that class
    (:func:`~advisors.script_reach.lightning_reaches`:
    a ``DataLoader``'s ``num_workers``; a ``torch.compile`` call, or an ``if`` around one — a model that never
    calls it has no option for it, and the fix stays injected)."""
    if set(knobs) == {"autocast"} and knobs["autocast"] in LIGHTNING_PRECISION:
        parser = next(
            (p for p in config.get("parsers") or [] if option(p, "trainer.precision")), None
        )
        if parser is None:
            return None
        return _cli_change(
            knobs,
            knobs,
            config,
            command,
            cwd,
            parser,
            "trainer.precision",
            LIGHTNING_PRECISION[knobs["autocast"]],
        )
    main = {k: v for k, v in knobs.items() if k not in SECONDARY or k == proof}
    if set(main) not in ({"num_workers"}, {"compile"}) or proof not in main:
        return None
    knob, value = next(iter(main.items()))
    names, where = ARGPARSE_NAMES[knob]
    for parser in config.get("parsers") or []:
        file, _ = site_of(parser)
        if parser.get("library") != "jsonargparse" or not file:
            continue
        flows = lightning_reaches(file)
        for opt in parser.get("options") or []:
            section, _, name = str(opt.get("dest")).partition(".")
            held = opt.get("value", opt.get("default"))
            if (
                name not in names
                or name not in flows.get(section, {}).get(where, set())
                or (
                    knob == "compile"
                    and (section != "model" or not isinstance(held, bool) or not value)
                )
                or (knob == "num_workers" and (not isinstance(held, int) or isinstance(held, bool)))
            ):
                continue
            return _cli_change(
                main,
                main,
                config,
                command,
                cwd,
                parser,
                str(opt["dest"]),
                "true" if knob == "compile" else str(int(value)),
                True if knob == "compile" else int(value),
            )
    return None


def _cli_change(
    knobs: Mapping[str, Any],
    observe: Mapping[str, Any],
    config: Mapping[str, Any],
    command: tuple[str, ...],
    cwd: str,
    parser: Mapping[str, Any],
    dest: str,
    text: str,
    value: Any = None,
) -> KnobChange | None:
    """LightningCLI's option ``dest`` (``trainer.precision``) set to ``text``: the flag (``--trainer.precision
    bf16-mixed``), changed in place when typed; else, when the command's ``--config`` YAML file holds that
    section, its line in a copy."""
    flag = f"--{dest}"
    if not any(a.split("=", 1)[0] == flag for a in command):
        for entry in config.get("files") or []:
            path = str(entry.get("file") or "")
            if (
                entry.get("library") == "jsonargparse"
                and path.endswith((".yaml", ".yml"))
                and isinstance(yaml_data(path).get(dest.split(".", 1)[0]), dict)
            ):
                return yaml_change(
                    knobs,
                    "lightning_cli",
                    command,
                    cwd,
                    path,
                    {dest: text if value is None else value},
                    observe,
                )
    file, line = site_of(parser)
    return KnobChange(
        with_flag(command, [flag], text),
        dict(observe),
        "lightning_cli",
        (f"{flag} {text}",),
        file,
        line,
    )
