"""The line to change: a kept fix rendered against the user's own file.

Where the change is a keyword argument of one call the script makes (its ``DataLoader(...)``, its optimizer,
its ``DistributedDataParallel(...)``), the edit is a unified diff of that file: the keyword added, or its
value replaced, located with :mod:`ast` from the call site the launcher recorded. Autocast becomes a ``with``
block around the statement that calls the model. Anything else is the fix's snippet placed at the recorded
line. The user's file is only read.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from advisors.verdict import Fix

#: Injection knob -> (keyword argument, how its value reads in code) for the calls that take them.
KWARGS: dict[str, dict[str, str]] = {
    "dataloader": {"num_workers": "num_workers", "pin_memory": "pin_memory",
                   "persistent_workers": "persistent_workers", "prefetch_factor": "prefetch_factor"},
    "optimizer": {"optimizer_impl": ""},  # foreach=True / fused=True
    "ddp": {"bucket_cap_mb_factor": "bucket_cap_mb", "static_graph": "static_graph"},
}
CALL_NAMES = {"dataloader": ("DataLoader",), "ddp": ("DistributedDataParallel", "DDP")}
MAX_FILE_BYTES = 2_000_000


@dataclass(frozen=True)
class Change:
    """``kind``: ``diff`` (a unified diff of ``file``) or ``snippet`` (code to place at ``file:line``)."""

    kind: str
    file: str | None
    line: int | None
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "file": self.file, "line": self.line, "text": self.text}


def kwargs_for(target: str, knobs: Mapping[str, Any], site: Mapping[str, Any]) -> dict[str, str]:
    """The keyword arguments (as source text) that express ``knobs`` at a ``target`` call."""
    out: dict[str, str] = {}
    for knob, value in knobs.items():
        if knob not in KWARGS.get(target, {}):
            continue
        if knob == "optimizer_impl":
            out[str(value)] = "True"
        elif knob == "bucket_cap_mb_factor":
            out["bucket_cap_mb"] = f"{float(site.get('bucket_cap_mb') or 25.0) * float(value):g}"
        else:
            out[KWARGS[target][knob]] = repr(value)
    return out


def render(fix: Fix, knobs: Mapping[str, Any], target: str | None, site: Mapping[str, Any] | None,
           device: str = "cpu") -> Change:
    """The edit for a kept fix: a diff where the file and call can be read, else the snippet at the line."""
    file, line = (str(site["file"]), int(site["line"])) if site else (None, None)
    source = _read(file)
    if source is not None and file is not None and line is not None and target is not None:
        new = None
        if target in KWARGS:
            new = _with_kwargs(source, line, target, site or {}, kwargs_for(target, knobs, site or {}))
        elif target == "model_call" and knobs.get("autocast") in ("bf16", "fp16"):
            dtype = "torch.bfloat16" if knobs["autocast"] == "bf16" else "torch.float16"
            new = _wrapped(source, line, f"with torch.autocast(device_type={device!r}, dtype={dtype}):")
        if new is not None and new != source:
            name = Path(file).name
            diff = difflib.unified_diff(source.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/{name}", f"b/{name}", n=2)
            return Change("diff", file, line, "".join(diff))
    where = f"# at {Path(file).name}:{line}\n" if file else "# no single place in your code: once, at start-up\n"
    return Change("snippet", file, line, where + fix.snippet)


def _read(file: str | None) -> str | None:
    if file is None:
        return None
    p = Path(file)
    try:
        if not p.is_file() or p.stat().st_size > MAX_FILE_BYTES:
            return None
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _call_at(tree: ast.AST, line: int, target: str, site: Mapping[str, Any]) -> ast.Call | None:
    """The call at ``line`` that builds the target: named like it, else the widest call that starts there."""
    names = CALL_NAMES.get(target, (str(site.get("type") or ""),))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    named = [c for c in calls if _name(c.func) in names]
    pool = named or [c for c in calls if c.lineno == line]
    return max(pool, key=lambda c: ((c.end_lineno or c.lineno) - c.lineno, -c.col_offset), default=None)


def _offset(lines: list[str], lineno: int, col: int) -> int:
    """Character offset in the whole text of (1-based line, UTF-8 byte column)."""
    before = sum(len(x) for x in lines[:lineno - 1])
    return before + len(lines[lineno - 1].encode("utf-8")[:col].decode("utf-8", errors="ignore"))


def _with_kwargs(source: str, line: int, target: str, site: Mapping[str, Any], kwargs: dict[str, str]) -> str | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    call = _call_at(tree, line, target, site)
    if call is None or not kwargs:
        return None
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    missing = dict(kwargs)
    for kw in call.keywords:
        if kw.arg in missing:
            v = kw.value
            start = _offset(lines, v.lineno, v.col_offset)
            end = _offset(lines, v.end_lineno or v.lineno, v.end_col_offset or v.col_offset)
            edits.append((start, end, missing.pop(kw.arg)))
    if missing:
        close = _offset(lines, call.end_lineno or call.lineno, (call.end_col_offset or 1) - 1)  # the ')'
        inside = source[:close].rstrip()
        args = [*call.args, *(k.value for k in call.keywords)]
        last = max(args, key=lambda a: (a.end_lineno or a.lineno, a.end_col_offset or 0), default=None)
        one_per_line = last is not None and inside.endswith(",") and (last.end_lineno or last.lineno) < \
            (call.end_lineno or call.lineno)
        if one_per_line:  # the user's style: one argument per line, each with a trailing comma
            arg_line = lines[(last.lineno if last is not None else call.lineno) - 1]
            indent = arg_line[:len(arg_line) - len(arg_line.lstrip())]
            text = "".join(f"\n{indent}{k}={v}," for k, v in missing.items())
        else:
            sep = "" if not args else (" " if inside.endswith(",") else ", ")
            text = sep + ", ".join(f"{k}={v}" for k, v in missing.items())
        edits.append((len(inside), len(inside), text))
    out = source
    for start, end, text in sorted(edits, reverse=True):
        out = out[:start] + text + out[end:]
    return out


def _wrapped(source: str, line: int, header: str) -> str | None:
    """``source`` with the statement at ``line`` inside ``header`` (a ``with`` line), indented one level."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    stmts = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno <= line <= (n.end_lineno or n.lineno)
             and not isinstance(n, (ast.For, ast.While, ast.If, ast.With, ast.Try, ast.FunctionDef,
                                    ast.AsyncFunctionDef, ast.ClassDef, ast.AsyncFor, ast.AsyncWith))]
    if not stmts:
        return None
    stmt = min(stmts, key=lambda s: (s.end_lineno or s.lineno) - s.lineno)
    lines = source.splitlines(keepends=True)
    first, last = stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) - 1
    indent = lines[first][:len(lines[first]) - len(lines[first].lstrip())]
    body = ["    " + x if x.strip() else x for x in lines[first:last + 1]]
    return "".join(lines[:first] + [indent + header + "\n"] + body + lines[last + 1:])
