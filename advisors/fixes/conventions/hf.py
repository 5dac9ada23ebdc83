"""HfArgumentParser (Hugging Face's example scripts): the ``TrainingArguments`` field of the knob
(:data:`stepwise_agent.switches.HF_FIELDS`), on the command line or in the JSON/YAML file the script read."""

from __future__ import annotations

from typing import Any, Mapping

from advisors.fixes.conventions.editing import (
    KnobChange,
    json_change,
    option,
    site_of,
    with_flag,
    yaml_change,
)
from stepwise_agent.switches import HF_FIELDS


def _hf_fields(knobs: Mapping[str, Any]) -> dict[str, Any] | None:
    fields: dict[str, Any] = {}
    for knob, value in knobs.items():
        if (
            knob not in HF_FIELDS
            or knob == "matmul_precision"
            or (knob == "autocast" and value != "bf16")
        ):
            return None
        fields.update(
            {
                f: v
                for f, v in HF_FIELDS[knob](value).items()
                if not (knob == "autocast" and v is False)
            }
        )
    return fields


def change(
    knobs: dict[str, Any], config: Mapping[str, Any], command: tuple[str, ...], cwd: str, proof: str
) -> KnobChange | None:
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
        opt = option(parser, name)
        if opt is None:
            return None
        text = (
            None if value is True else str(value).lower() if isinstance(value, bool) else str(value)
        )
        new = with_flag(new, list(opt["flags"]), text)
        typed.append(max(opt["flags"], key=len) + ("" if text is None else f" {text}"))
    file, line = site_of(parser)
    return KnobChange(new, knobs, "hf", tuple(typed), file, line)


def _hf_file(
    knobs: dict[str, Any],
    fields: dict[str, Any],
    entry: Mapping[str, Any],
    command: tuple[str, ...],
    cwd: str,
) -> KnobChange | None:
    path = str(entry.get("file") or "")
    if any(f not in (entry.get("fields") or []) for f in fields):
        return None
    if path.endswith(".json"):
        return json_change(knobs, "hf", command, cwd, path, fields)
    if path.endswith((".yaml", ".yml")):
        return yaml_change(knobs, "hf", command, cwd, path, fields)
    return None
