"""The line to change: a kept fix rendered against the user's own file.

Where the change is a keyword argument of a call the script makes (its ``DataLoader(...)``, its optimizer,
its ``DistributedDataParallel(...)``), the edit is a unified diff of that file: the keyword added, or its
value replaced, located with :mod:`ast` from the call site the launcher recorded — at every such call the knob
acted on (a GAN's two optimizers), in one diff. Autocast becomes a ``with`` block around each statement that
calls a model. A script driven by a framework gets the change at the framework's own switch, in the framework's
terms: ``TrainingArguments(bf16=True, dataloader_num_workers=4)``, ``L.Trainer(precision="bf16-mixed")``,
``Accelerator(mixed_precision="bf16")``. Hand-written attention becomes one ``scaled_dot_product_attention``
call (:mod:`advisors.experiments.attention_diff`), a checkpointed block's call ``checkpoint(block, x)``
(:mod:`advisors.experiments.checkpoint_diff`). Anything else is the fix's snippet placed at the recorded
line. The user's file is only read; a file inside an installed library is never diffed.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from advisors.experiments.script_terms import (
    device_expr,
    dtype_select,
    is_library_file,
    literal,
    prefers_double_quotes,
    read_source,
    simple_statement,
)
from advisors.verdict import Fix
from stepwise_agent.switches import SWITCHES

#: Injection knob -> (keyword argument, how its value reads in code) for the calls that take them.
KWARGS: dict[str, dict[str, str]] = {
    "dataloader": {
        "num_workers": "num_workers",
        "pin_memory": "pin_memory",
        "persistent_workers": "persistent_workers",
        "prefetch_factor": "prefetch_factor",
    },
    "optimizer": {"optimizer_impl": ""},  # foreach=True / fused=True
    "ddp": {"bucket_cap_mb_factor": "bucket_cap_mb", "static_graph": "static_graph"},
}
CALL_NAMES = {
    "dataloader": ("DataLoader",),
    "ddp": ("DistributedDataParallel", "DDP"),
    "autocast_ctx": ("autocast",),
}


@dataclass(frozen=True)
class Change:
    """``kind``: ``diff`` (a unified diff of ``file``) or ``snippet`` (code to place at ``file:line``)."""

    kind: str
    file: str | None
    line: int | None
    text: str
    sites: tuple[str, ...] = ()  # every file:line the change covers

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "file": self.file,
            "line": self.line,
            "text": self.text,
            "sites": list(self.sites),
        }


def _shown(knob: str, fields: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    if knob != "autocast":
        return fields
    return lambda v: {k: x for k, x in fields(v).items() if x is not False}


#: A framework's own switch (the call its user configures it with) -> knob -> its keyword arguments there: the
#: agent's own table (what it sets at boot is what the diff shows), less an autocast's "the other precision off"
#: (``fp16=False`` beside ``bf16=True``), which is the default a reader need not see.
SWITCH_KWARGS: dict[str, dict[str, Callable[[Any], dict[str, Any]]]] = {
    switch: {knob: _shown(knob, fields) for knob, fields in table.items()}
    for switch, table in SWITCHES.items()
}
CALL_NAMES.update(
    {
        "training_arguments": ("TrainingArguments",),
        "lightning_trainer": ("Trainer",),
        "accelerator": ("Accelerator",),
        "fabric": ("Fabric",),
    }
)


def switch_for(knobs: Mapping[str, Any], sites: Mapping[str, Any]) -> str | None:
    """The framework switch recorded in ``sites`` that takes every one of ``knobs``, if any."""
    for switch, table in SWITCH_KWARGS.items():
        if switch in sites and knobs and all(k in table for k in knobs):
            return switch
    return None


def kwargs_for(
    target: str, knobs: Mapping[str, Any], site: Mapping[str, Any], double: bool = False
) -> dict[str, str]:
    """The keyword arguments (as source text, strings in the file's quotes: ``double``) that express ``knobs`` at a
    ``target`` call."""
    out: dict[str, str] = {}
    if target in SWITCH_KWARGS:
        for knob, value in knobs.items():
            if knob in SWITCH_KWARGS[target]:
                out.update(
                    {k: literal(v, double) for k, v in SWITCH_KWARGS[target][knob](value).items()}
                )
        return out
    for knob, value in knobs.items():
        if knob not in KWARGS.get(target, {}):
            continue
        if knob == "optimizer_impl":
            out[str(value)] = "True"
        elif knob == "bucket_cap_mb_factor":
            out["bucket_cap_mb"] = f"{float(site.get('bucket_cap_mb') or 25.0) * float(value):g}"
        else:
            out[KWARGS[target][knob]] = literal(value, double)
    return out


def render(
    fix: Fix,
    knobs: Mapping[str, Any],
    target: str | None,
    site: Mapping[str, Any] | None,
    device: str = "cpu",
) -> Change:
    """The edit for a fix: one diff covering every site it acted on (``site["all"]``: each model call, each
    optimizer, each DataLoader; a framework's switch when ``site["target"]`` names one), else the snippet at the
    first site's line. A site inside an installed library, or one where a library built the object
    (``via``) and no switch of it is known, gets the snippet: no diff ever touches a library."""
    target = str(site.get("target")) if site and site.get("target") else target
    sites = [
        s for s in ((site or {}).get("all") or ([site] if site else [])) if s and s.get("file")
    ]
    file, line = (str(site["file"]), int(site["line"])) if site else (None, None)
    labels = tuple(f"{s['file']}:{s['line']}" for s in sites)
    built = (site or {}).get(
        "build"
    ) or {}  # the agent's record of the line that moved/built the model
    texts: list[str] = []
    for f in dict.fromkeys(str(s["file"]) for s in sites):
        group = [s for s in sites if str(s["file"]) == f]
        near = tuple(
            int(b["line"])
            for b in (built, built.get("built") or {})
            if b.get("file") == f and b.get("line")
        )
        text = _file_diff(f, group, knobs, target, device, near)
        if text is None:
            texts = []
            break
        texts.append(text)
    if texts and target is not None:
        return Change("diff", file, line, "".join(texts), labels)
    via = f"# {site['via']} builds this inside your call here\n" if site and site.get("via") else ""
    where = (
        f"# at {Path(file).name}:{line}\n"
        if file
        else "# no single place in your code: once, at start-up\n"
    )
    return Change("snippet", file, line, where + via + fix.snippet, labels)


def _file_diff(
    file: str,
    sites: list[Mapping[str, Any]],
    knobs: Mapping[str, Any],
    target: str | None,
    device: str,
    near: tuple[int, ...] = (),
) -> str | None:
    """The unified diff of ``file`` with every site in it changed, or ``None`` when one cannot be. ``near``: the
    lines that moved or built the model in this run, whose device an autocast takes."""
    source = read_source(file)
    if source is None or target is None or is_library_file(file):
        return None
    new: str | None = source
    if target in KWARGS or target in SWITCH_KWARGS:
        for s in sorted(
            sites, key=lambda s: int(s["line"]), reverse=True
        ):  # bottom-up: lines above stay put
            if new is None or (s.get("via") and target not in SWITCH_KWARGS):
                return None
            new = _with_kwargs(
                new,
                int(s["line"]),
                target,
                s,
                kwargs_for(target, knobs, s, prefers_double_quotes(source)),
            )
    elif target == "model_call" and knobs.get("autocast") in ("bf16", "fp16"):
        if any(s.get("via") for s in sites):
            return None
        dtype = "torch.bfloat16" if knobs["autocast"] == "bf16" else "torch.float16"
        line0 = min(int(s["line"]) for s in sites)
        header = f"with torch.autocast(device_type={device_expr(source, device, line0, near)}, dtype={dtype}):"
        for first in sorted(
            _statements(
                source,
                [int(s["line"]) for s in sites if s.get("grad") is not False]
                or [int(s["line"]) for s in sites],
            ),
            reverse=True,
        ):
            ctx = _own_ctx(new, first, dtype) if new is not None else None
            own = _own_autocast(new, first) if new is not None and ctx is None else None
            if (
                ctx is not None and new is not None
            ):  # nanoGPT's `with ctx:`, ctx off on this device: that line
                lines = new.splitlines(keepends=True)
                if (
                    ctx[3] is not None
                ):  # its dtype chosen by name (llm.c's --dtype): that choice, one line
                    lines[ctx[3][0] - 1] = ctx[3][1]
                new = "".join(lines[: ctx[0] - 1] + [ctx[2]] + lines[ctx[1] :])
            elif (
                own is not None and new is not None
            ):  # the script's own autocast: on in place, not nested
                select = dtype_select(new, own, dtype)
                if (
                    select is not None
                ):  # its own dtype variable kept, the line that chooses it changed
                    lines = new.splitlines(keepends=True)
                    lines[select[0] - 1] = select[1]
                    new = "".join(lines)
                new = _with_kwargs(
                    new,
                    own.lineno,
                    "autocast_ctx",
                    {},
                    {"enabled": "True"} if select else {"dtype": dtype, "enabled": "True"},
                )
            else:
                new = _wrapped(new, first, header) if new is not None else None
    elif (
        target == "model_build"
        and (knobs.get("compile") or knobs.get("compile_mode"))
        and len(sites) == 1
    ):
        s0 = sites[0]
        lines = source.splitlines(keepends=True)
        end = int(s0.get("end") or s0["line"])
        indent = " " * int(s0.get("col") or 0)
        name = str(s0["name"])
        q = '"' if prefers_double_quotes(source) else "'"
        mode = (
            f", mode={q}{knobs['compile_mode']}{q}" if knobs.get("compile_mode") else ""
        )  # CUDA graphs
        new = "".join(
            lines[:end] + [f"{indent}{name} = torch.compile({name}{mode})\n"] + lines[end:]
        )
    elif target == "attention" and len(sites) == 1:
        from advisors.experiments.attention_diff import sdpa_edit

        new = sdpa_edit(source, sites[0])
    elif target == "checkpoint" and len(sites) == 1:
        from advisors.experiments.checkpoint_diff import checkpoint_edit

        new = checkpoint_edit(source, sites[0])
    else:
        return None
    if new is None or new == source:
        return None
    name = Path(file).name
    return "".join(
        difflib.unified_diff(
            source.splitlines(keepends=True),
            new.splitlines(keepends=True),
            f"a/{name}",
            f"b/{name}",
            n=2,
        )
    )


def _own_ctx(
    source: str, line: int, dtype: str
) -> tuple[int, int, str, tuple[int, str] | None] | None:
    """The script's own autocast context, held in a variable that is off on this device — nanoGPT's
    ``ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)``
    around its training call (``with ctx:``): that assignment is the line to change, to its autocast branch with
    the fix's dtype — or, where the script chooses that dtype by name (:func:`dtype_select`), with its own dtype
    variable and the choice changed. ``(first line, last line, new text, the choice's line and text)``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    withs = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.With) and n.lineno < line <= (n.end_lineno or n.lineno)
    ]
    names = [
        i.context_expr.id
        for w in sorted(withs, key=lambda n: -n.lineno)
        for i in w.items
        if isinstance(i.context_expr, ast.Name)
    ]
    for name in names[:1]:
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Assign)
                and node.lineno < line
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == name
                and isinstance(node.value, ast.IfExp)
            ):
                continue
            branch = next(
                (
                    b
                    for b in (node.value.body, node.value.orelse)
                    if isinstance(b, ast.Call) and _name(b.func) == "autocast"
                ),
                None,
            )
            if branch is None:
                continue
            last = node.end_lineno or node.lineno
            select = dtype_select(source, branch, dtype)
            if select is not None and node.lineno <= select[0] <= last:
                select = None
            fixed = ast.keyword(arg="dtype", value=ast.parse(dtype, mode="eval").body)
            keywords = (
                branch.keywords
                if select is not None
                else [k for k in branch.keywords if k.arg != "dtype"] + [fixed]
            )
            call = ast.Call(func=branch.func, args=branch.args, keywords=keywords)
            indent = " " * node.col_offset
            return node.lineno, last, f"{indent}{name} = {ast.unparse(call)}\n", select
    return None


def _own_autocast(source: str, line: int) -> ast.Call | None:
    """The script's own ``torch.autocast(...)`` call whose ``with`` holds ``line``, if any."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    withs = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.With) and n.lineno < line <= (n.end_lineno or n.lineno)
    ]
    for w in sorted(withs, key=lambda n: -n.lineno):
        for item in w.items:
            call = item.context_expr
            if isinstance(call, ast.Call) and _name(call.func) == "autocast":
                return call
    return None


def _statements(source: str, lines: list[int]) -> set[int]:
    """The first line of the innermost simple statement holding each of ``lines`` (two calls in one statement,
    such as ``D(G(z))``, are one statement to wrap)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(lines)
    out = set()
    for line in lines:
        stmt = simple_statement(tree, line)
        out.add(stmt.lineno if stmt is not None else line)
    return out


def _name(func: ast.expr) -> str:
    return (
        func.attr
        if isinstance(func, ast.Attribute)
        else func.id
        if isinstance(func, ast.Name)
        else ""
    )


def _call_at(tree: ast.AST, line: int, target: str, site: Mapping[str, Any]) -> ast.Call | None:
    """The call at ``line`` that builds the target: named like it, else the widest call that starts there."""
    names = CALL_NAMES.get(target, (str(site.get("type") or ""),))
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    named = [c for c in calls if _name(c.func) in names]
    pool = named or [c for c in calls if c.lineno == line]
    return max(
        pool, key=lambda c: ((c.end_lineno or c.lineno) - c.lineno, -c.col_offset), default=None
    )


def _offset(lines: list[str], lineno: int, col: int) -> int:
    """Character offset in the whole text of (1-based line, UTF-8 byte column)."""
    before = sum(len(x) for x in lines[: lineno - 1])
    return before + len(lines[lineno - 1].encode("utf-8")[:col].decode("utf-8", errors="ignore"))


def _with_kwargs(
    source: str, line: int, target: str, site: Mapping[str, Any], kwargs: dict[str, str]
) -> str | None:
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
        close = _offset(
            lines, call.end_lineno or call.lineno, (call.end_col_offset or 1) - 1
        )  # the ')'
        inside = source[:close].rstrip()
        args = [*call.args, *(k.value for k in call.keywords)]
        last = max(
            args, key=lambda a: (a.end_lineno or a.lineno, a.end_col_offset or 0), default=None
        )
        one_per_line = (
            last is not None
            and inside.endswith(",")
            and (last.end_lineno or last.lineno) < (call.end_lineno or call.lineno)
        )
        if one_per_line:  # the user's style: one argument per line, each with a trailing comma
            arg_line = lines[(last.lineno if last is not None else call.lineno) - 1]
            indent = arg_line[: len(arg_line) - len(arg_line.lstrip())]
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
    stmt = simple_statement(tree, line)
    if stmt is None:
        return None
    lines = source.splitlines(keepends=True)
    first, last = stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) - 1
    indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    body = ["    " + x if x.strip() else x for x in lines[first : last + 1]]
    return "".join(lines[:first] + [indent + header + "\n"] + body + lines[last + 1 :])
