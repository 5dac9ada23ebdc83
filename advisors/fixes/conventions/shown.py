"""What a change of the user's command reads as: the command line before and after, or the config file's diff."""

from __future__ import annotations

import difflib
import shlex
from pathlib import Path
from typing import Any

from advisors.fixes.conventions.editing import CONFIG_DIR


def command_text(command: tuple[str, ...] | list[str]) -> str:
    return " ".join(shlex.quote(str(c)) for c in command)


def shown_change(before: tuple[str, ...], after: tuple[str, ...]) -> dict[str, Any]:
    """The change between two commands of one script: the config file's diff when the commands differ only by a
    changed copy of it (the user's file named), else the command line before and after."""
    differ = [(a, b) for a, b in zip(before, after) if a != b]
    if (
        len(before) == len(after)
        and len(differ) == 1
        and Path(differ[0][1]).parent.parent == CONFIG_DIR
    ):
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
    return {
        "kind": "command",
        "file": None,
        "line": None,
        "text": f"- {command_text(before)}\n+ {command_text(after)}\n",
        "sites": [],
    }


def command_evidence(before: tuple[str, ...], after: tuple[str, ...]) -> str:
    """What the patched arm ran, in one line: the user's command with the flags added or changed, or with the
    config file's lines changed."""
    shown = shown_change(before, after)
    if shown["kind"] == "config":
        lines = [
            x[1:].strip().rstrip(",")
            for x in shown["text"].splitlines()
            if x.startswith("+") and not x.startswith("+++")
        ]
        return (
            f"ran your own command with {Path(str(shown['file'])).name} changed: {', '.join(lines)}"
        )
    added: list[str] = []  # each changed or added argument, with the option it is the value of
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(
        a=before, b=after, autojunk=False
    ).get_opcodes():
        if tag in ("replace", "insert"):
            option = (
                after[j1 - 1]
                if tag == "replace"
                and j1
                and after[j1 - 1].startswith("-")
                and "=" not in after[j1]
                else None
            )  # a value changed in place: named with its option
            added.extend(
                ([option] if option and option not in added[-1:] else []) + list(after[j1:j2])
            )
    return f"ran your own command with {command_text(added)} (nothing injected)"
