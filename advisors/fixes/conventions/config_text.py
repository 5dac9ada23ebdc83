"""Config files edited as a person would edit them: a key's value changed on its own line (its comment kept), a
missing key added under its parent, and the result loaded back to check it says what was meant (else the whole
mapping rewritten). For :mod:`advisors.fixes.conventions`, which runs a script's patched arm from a copy
of its YAML or JSON config with a knob's line changed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

YAML_WORDS = ("true", "false", "yes", "no", "on", "off", "null", "y", "n", "~")


def yaml_scalar(value: Any) -> str:
    """``value`` as a YAML scalar: plain where it loads back as itself (``true``, ``4``, ``bf16-mixed``)."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return json.dumps(value)
    text = str(value)
    plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", text) and text.lower() not in YAML_WORDS
    return text if plain else json.dumps(text)


def yaml_with(text: str, fields: Mapping[str, Any]) -> tuple[str, int] | None:
    """A block-style YAML mapping's text with ``fields`` set (a dotted key is a nested one: ``trainer.precision``),
    line by line as a person would edit it: a key's value replaced on its line (its comment kept), a missing key
    added under its parent (or at the end, with the parents it lacks); and the line of the first field's. Where
    that would not load as the original with those fields set (flow style…), the whole mapping rewritten; ``None``
    when the text is no mapping or a field's parent holds a value."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return None
    lines = text.splitlines()
    first: int | None = None
    for key, value in fields.items():
        at = yaml_set(lines, key.split("."), yaml_scalar(value))
        first = at if first is None else first
    out = "\n".join(lines) + "\n"
    expected = json.loads(json.dumps(data, default=str))
    for key, value in fields.items():
        node = expected
        *parents, leaf = key.split(".")
        for p in parents:
            if not isinstance(node.setdefault(p, {}), dict):
                return None  # a parent that holds a value, not a mapping
            node = node[p]
        node[leaf] = value
    try:
        if json.loads(json.dumps(yaml.safe_load(out), default=str)) == expected:
            return out, first or 1
    except yaml.YAMLError:
        pass
    return yaml.safe_dump(
        expected, sort_keys=False
    ), 1  # not editable line by line: the whole mapping rewritten


def yaml_set(lines: list[str], path: list[str], value: str) -> int:
    """Sets ``path`` to ``value`` in ``lines`` (changed in place); the 1-based line it is on."""
    start, end, indent = 0, len(lines), 0
    for depth, key in enumerate(path):
        pattern = re.compile(rf"^( {{{indent}}}){re.escape(key)}\s*:(\s*)([^#]*?)(\s*#.*)?$")
        found = next((i for i in range(start, end) if pattern.match(lines[i])), None)
        if found is None:
            block = [" " * (indent + 2 * n) + f"{k}:" for n, k in enumerate(path[depth:])]
            block[-1] += f" {value}"
            at = end
            while at > start and not lines[at - 1].strip():
                at -= 1
            lines[at:at] = block
            return at + len(block)
        if depth == len(path) - 1:
            m = pattern.match(lines[found])
            assert m is not None
            lines[found] = f"{m.group(1)}{key}: {value}{m.group(4) or ''}"
            return found + 1
        start = found + 1
        end = next(
            (
                i
                for i in range(start, end)
                if lines[i].strip()
                and not lines[i].lstrip().startswith("#")
                and len(lines[i]) - len(lines[i].lstrip()) <= indent
            ),
            end,
        )
        indent = child_indent(lines, start, end, indent)
    return 1


def child_indent(lines: list[str], start: int, end: int, parent: int) -> int:
    return next(
        (
            len(x) - len(x.lstrip())
            for x in lines[start:end]
            if x.strip() and not x.lstrip().startswith("#")
        ),
        parent + 2,
    )


def json_with(text: str, fields: Mapping[str, Any]) -> str:
    """A JSON object's text with ``fields`` set, line by line as a person would edit it (a key's value replaced
    on its line, a new key added as the first), else the whole object rewritten."""
    import re

    out = text
    for key, value in fields.items():
        pattern = re.compile(
            rf'("{re.escape(key)}"\s*:\s*)(true|false|null|-?[0-9.eE+-]+|"[^"\n]*")'
        )
        if pattern.search(out):
            out = pattern.sub(lambda m: m.group(1) + json.dumps(value), out, count=1)
            continue
        brace = out.find("{")
        nxt = out[brace + 1 :].lstrip(" ")
        indent = "  " if not nxt.startswith("\n") else re.match(r"\n([ \t]*)", nxt).group(1) or "  "  # type: ignore[union-attr]
        sep = "," if out[brace + 1 :].strip() != "}" else ""
        out = (
            out[: brace + 1]
            + f"\n{indent}{json.dumps(key)}: {json.dumps(value)}{sep}"
            + out[brace + 1 :].lstrip(" ")
            if nxt.startswith("\n")
            else out[: brace + 1] + f" {json.dumps(key)}: {json.dumps(value)}{sep} " + nxt
        )
    try:
        expected = {**json.loads(text), **fields}
        if json.loads(out) == expected:
            return out if out.endswith("\n") else out + "\n"
    except ValueError:
        pass
    return json.dumps({**json.loads(text), **fields}, indent=2) + "\n"


def key_line(path: str, key: str) -> int:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return 1
    brace = next(
        (i for i, line in enumerate(lines, 1) if "{" in line), 0
    )  # a new key goes first (json_with)
    return next((i for i, line in enumerate(lines, 1) if f'"{key}"' in line), brace + 1)


def yaml_data(path: str) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def yaml_line(path: str, key: str) -> int:
    """The line of ``key`` (dotted: nested) in the YAML file ``path`` (where it would be added when missing)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return 1
    return yaml_set(lines, key.split("."), "")
