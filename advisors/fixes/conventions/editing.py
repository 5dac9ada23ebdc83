"""Editing a user's command line and config files: an option set, a Hydra override, a config file's copy
with a line changed (the user's files are never written), and the :class:`KnobChange` every convention returns."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from advisors.fixes.conventions.config_text import json_with, key_line, yaml_scalar, yaml_with

#: knobs of a fix that only tune its main knob: left out when the script's flag cannot set them
SECONDARY = ("persistent_workers", "prefetch_factor", "pin_memory")
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


def with_flag(
    command: tuple[str, ...], flags: list[str], value: str | None, equals: bool = False
) -> tuple[str, ...]:
    """``command`` with the option ``flags`` set to ``value`` (``None``: a switch without value); an existing
    occurrence is replaced in place, else the option is appended."""
    out = list(command)
    for i, a in enumerate(out):
        name = a.split("=", 1)[0]
        if name not in flags:
            continue
        if (
            value is None and i + 1 < len(out) and out[i + 1].lower() in BOOL_WORDS
        ):  # HF's ``--bf16 false``
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


def option(parser: Mapping[str, Any], dest: str) -> dict[str, Any] | None:
    return next(
        (o for o in parser.get("options") or [] if o.get("dest") == dest and o.get("flags")), None
    )


def site_of(parser: Mapping[str, Any]) -> tuple[str | None, int | None]:
    site = parser.get("site") or {}
    return site.get("file"), site.get("line")


def json_change(
    knobs: Mapping[str, Any],
    convention: str,
    command: tuple[str, ...],
    cwd: str,
    path: str,
    fields: Mapping[str, Any],
    observe: Mapping[str, Any] | None = None,
) -> KnobChange | None:
    """The user's command with its JSON config file ``path`` (an object) replaced by a copy holding ``fields``."""
    try:
        original = Path(path).read_text(encoding="utf-8")
        data = json.loads(original)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    typed = tuple(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in fields.items())
    return config_copy(
        knobs,
        convention,
        command,
        cwd,
        path,
        json_with(original, fields),
        typed,
        key_line(path, next(iter(fields))),
        observe,
    )


def config_copy(
    knobs: Mapping[str, Any],
    convention: str,
    command: tuple[str, ...],
    cwd: str,
    path: str,
    text: str,
    typed: tuple[str, ...],
    line: int,
    observe: Mapping[str, Any] | None = None,
    names: tuple[str, ...] = (),
) -> KnobChange | None:
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
    new = (*command[:index], value, *command[index + 1 :])
    return KnobChange(
        new,
        dict(observe if observe is not None else knobs),
        convention,
        typed,
        path,
        line,
        (path, str(copy)),
    )


def config_argument(command: tuple[str, ...], cwd: str, path: str) -> int | None:
    """Where in ``command`` the config file ``path`` is named: a positional argument or ``--opt=PATH``."""
    for i, a in enumerate(command):
        value = a.split("=", 1)[1] if a.startswith("-") and "=" in a else a
        if value and os.path.abspath(os.path.join(cwd, value)) == path:
            return i
    return None


def yaml_change(
    knobs: Mapping[str, Any],
    convention: str,
    command: tuple[str, ...],
    cwd: str,
    path: str,
    fields: Mapping[str, Any],
    observe: Mapping[str, Any] | None = None,
) -> KnobChange | None:
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


def with_override(command: tuple[str, ...], key: str, value: str) -> tuple[str, ...]:
    """``command`` with the Hydra override ``key=value``: one already typed (``key=``, ``+key=``, ``++key=``)
    changed in place, else appended."""
    for i, a in enumerate(command):
        name = a.split("=", 1)[0]
        if "=" in a and not a.startswith("-") and name.lstrip("+") == key:
            return (*command[:i], f"{name}={value}", *command[i + 1 :])
    return (*command, f"{key}={value}")
