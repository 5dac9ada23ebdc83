"""The script's own terms, read from its source for a change shown against it: the line that ran to build the
model (recorded by the agent as the ``model_build`` site; else found by reading), the device expression it
already uses (``args.device``, ``device_type``), the dtype flag or variable it already has (llm.c's ``ptdtype``
chosen by ``--dtype``); and the helpers that read a user's file (never an installed library's).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, Mapping

MAX_FILE_BYTES = 2_000_000
LIBRARY_DIRS = ("site-packages", "dist-packages")


def prefers_double_quotes(source: str) -> bool:
    """Whether the file writes its string literals with double quotes (most of them): a diff in it does too."""
    import io
    import tokenize

    double = single = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.STRING:
                body = tok.string.lstrip("rbuRBUfF")
                double += body.startswith('"')
                single += body.startswith("'")
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return False
    return double > single


def literal(value: Any, double: bool = False) -> str:
    """``value`` as source text, a string in the file's own quotes."""
    if isinstance(value, str) and double and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return repr(value)


def is_library_file(file: str) -> bool:
    """A file inside an installed package: never a place to change (nor to diff)."""
    return any(part in LIBRARY_DIRS for part in Path(file).parts)


def read_source(file: str | None) -> str | None:
    """The text of a user's file, or ``None`` when it is not a readable text file of a sane size."""
    if file is None:
        return None
    p = Path(file)
    try:
        if not p.is_file() or p.stat().st_size > MAX_FILE_BYTES:
            return None
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def simple_statement(tree: ast.AST, line: int) -> ast.stmt | None:
    """The innermost statement (not a block) that spans ``line``."""
    stmts = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.stmt)
        and n.lineno <= line <= (n.end_lineno or n.lineno)
        and not isinstance(
            n,
            (
                ast.For,
                ast.While,
                ast.If,
                ast.With,
                ast.Try,
                ast.FunctionDef,
                ast.AsyncFunctionDef,
                ast.ClassDef,
                ast.AsyncFor,
                ast.AsyncWith,
            ),
        )
    ]
    return min(stmts, key=lambda s: (s.end_lineno or s.lineno) - s.lineno) if stmts else None


def device_expr(
    source: str, device: str, line: int | None = None, near: tuple[int, ...] = ()
) -> str:
    """The script's own device variable as an autocast's ``device_type`` (``device_type``, ``device.type``, or —
    inside a method, where the class keeps one — ``self.device``, ``.type`` added when it is a ``torch.device``),
    else the device it moves the model or its batches to (:func:`device_near`: ``args.device``), else the device
    the runs used, in the file's quotes."""
    if re.search(r"^\s*device_type\s*=", source, re.M):
        return "device_type"
    if line is not None and _in_method(source, line):
        kept = re.findall(r"^\s*self\.device\s*=\s*(.+)$", source, re.M)
        if any("torch.device(" in rhs for rhs in kept):
            return "self.device.type"
        if any(re.search(r"""['"](cuda|cpu|mps)['"]""", rhs) for rhs in kept):
            return "self.device"  # a string ('cuda' if … else 'cpu'): minGPT's trainer
    if re.search(r"^\s*device\s*=\s*torch\.device\(", source, re.M):
        return "device.type"
    return device_near(source, line, near) or literal(device, prefers_double_quotes(source))


def _in_method(source: str, line: int) -> bool:
    """Whether ``line`` is inside a function whose first argument is ``self``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.args.args
            and node.args.args[0].arg == "self"
            and node.lineno <= line <= (node.end_lineno or node.lineno)
        ):
            return True
    return False


#: functions that evaluate or are called per step: never where a model is built (nor compiled)
_NOT_BUILD = ("eval", "estimate", "valid", "test", "_step", "forward", "predict")


def construction_site(site: Mapping[str, Any]) -> dict[str, Any] | None:
    """Where the model called at ``site`` is built: the last assignment of the called name (``model``,
    ``self.model``; after its ``.to(device)``) outside any loop and any evaluation/step function, before the call
    when there is one; ``None`` when no such assignment is in the file."""
    file = str(site.get("file") or "")
    source = read_source(file)
    if source is None or is_library_file(file):
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    stmt = simple_statement(tree, int(site["line"]))
    if stmt is None:
        return None
    names = [
        ast.unparse(c.func)
        for c in ast.walk(stmt)
        if isinstance(c, ast.Call)
        and isinstance(c.func, (ast.Name, ast.Attribute))
        and ast.unparse(c.func).split(".")[0] != "torch"
    ]
    loops = [
        (n.lineno, n.end_lineno or n.lineno)
        for n in ast.walk(tree)
        if isinstance(n, (ast.For, ast.While, ast.AsyncFor))
    ]
    skip = [
        (n.lineno, n.end_lineno or n.lineno)
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and any(w in n.name.lower() for w in _NOT_BUILD)
    ]
    for name in names:
        found = [
            n
            for n in ast.walk(tree)
            if isinstance(n, (ast.Assign, ast.AnnAssign))
            and any(
                isinstance(t, (ast.Name, ast.Attribute)) and ast.unparse(t) == name
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            )
            and not any(a <= n.lineno <= b for a, b in loops + skip)
        ]
        before = [n for n in found if n.lineno < int(site["line"])] or found
        if before:
            last = max(before, key=lambda n: n.lineno)
            lines = source.splitlines()
            return {
                "file": file,
                "line": last.lineno,
                "code": lines[last.lineno - 1].strip(),
                "end": last.end_lineno or last.lineno,
                "col": last.col_offset,
                "name": name,
            }
    return None


def _holder(stmt: ast.stmt) -> str | None:
    """The variable a statement leaves the model in: an assignment's one target (``model = MLP(config)``,
    ``self.model = self.model.to(self.device)``), or the receiver of a move in place (``model.to(args.device)``)."""
    target: ast.expr | None = None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target = stmt.target
    elif (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Attribute)
        and stmt.value.func.attr in ("to", "cuda")
    ):
        target = stmt.value.func.value
    if not isinstance(target, (ast.Name, ast.Attribute)):
        return None
    name = ast.unparse(target)
    return None if name in ("self", "cls") else name


def ran_build(site: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The agent's ``model_build`` site — the line that ran to move (else to construct) the model — as the place
    to add a line after: ``file``, ``line``, ``code``, ``end``, ``col`` and ``name`` (the variable holding the
    model there). Its construction (``built``) when the move's line names no variable; ``None`` when neither is a
    statement of a readable user file (an old run recorded none: the caller reads the file instead)."""
    for s in (site, (site or {}).get("built")):
        if not s or not s.get("file") or not s.get("line"):
            continue
        file = str(s["file"])
        source = read_source(file)
        if source is None or is_library_file(file):
            continue
        try:
            stmt = simple_statement(ast.parse(source), int(s["line"]))
        except SyntaxError:
            continue
        name = _holder(stmt) if stmt is not None else None
        if stmt is None or name is None:
            continue
        return {
            "file": file,
            "line": stmt.lineno,
            "code": source.splitlines()[stmt.lineno - 1].strip(),
            "end": stmt.end_lineno or stmt.lineno,
            "col": stmt.col_offset,
            "name": name,
        }
    return None


#: a variable that names a device: ``device``, ``args.device``, ``dev``, ``local_rank``, ``gpu``
_DEVICE_WORD = re.compile(r"dev|rank|gpu|cuda", re.IGNORECASE)


def _device_arg(call: ast.Call) -> str | None:
    """The variable a ``.to(...)`` call or a ``device=`` keyword moves to (``args.device``), if it names one."""
    arg = next((k.value for k in call.keywords if k.arg == "device"), None)
    if (
        arg is None
        and isinstance(call.func, ast.Attribute)
        and call.func.attr in ("to", "cuda")
        and call.args
    ):
        arg = call.args[0]
    if not isinstance(arg, (ast.Name, ast.Attribute)):
        return None
    text = ast.unparse(arg)
    return text if not text.startswith("torch.") and _DEVICE_WORD.search(text) else None


def _strings_only(value: ast.expr) -> bool:
    """Whether an expression can only be a device string without an index (``'cuda' if … else 'cpu'``)."""
    if isinstance(value, ast.IfExp):
        return _strings_only(value.body) and _strings_only(value.orelse)
    return (
        isinstance(value, ast.Constant) and isinstance(value.value, str) and ":" not in value.value
    )


def _as_type(tree: ast.AST, expr: str) -> str:
    """``expr`` (a device) as an autocast's ``device_type``: as is when the script only ever assigns it a plain
    device string, ``expr.type`` when it holds a ``torch.device``, else ``torch.device(expr).type`` (an argparse
    ``--device`` may say ``cuda:0``, which ``device_type`` does not take)."""
    values = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and any(ast.unparse(t) == expr for t in n.targets)
    ]
    if values and all(_strings_only(v) for v in values):
        return expr
    if values and all(
        isinstance(v, ast.Call) and ast.unparse(v.func) == "torch.device" for v in values
    ):
        return f"{expr}.type"
    return f"torch.device({expr}).type"


def device_near(source: str, line: int | None, near: tuple[int, ...] = ()) -> str | None:
    """The device the script itself moves things to, as ``device_type`` text: first at ``near`` (the recorded
    line that moved the model: ``model.to(args.device)``), else the ``.to(...)``/``device=`` nearest ``line`` in
    its function (``batch = [t.to(args.device) for t in batch]``); ``None`` when none names a variable."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for at in near:
        stmt = simple_statement(tree, at)
        found = (
            [d for c in ast.walk(stmt) if isinstance(c, ast.Call) and (d := _device_arg(c))]
            if stmt
            else []
        )
        if found:
            return _as_type(tree, found[0])
    if line is None:
        return None
    scopes = [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    scope = min(scopes, key=lambda n: (n.end_lineno or n.lineno) - n.lineno) if scopes else tree
    calls = sorted(
        (abs(c.lineno - line), c.lineno, d)
        for c in ast.walk(scope)
        if isinstance(c, ast.Call) and (d := _device_arg(c))
    )
    return _as_type(tree, calls[0][2]) if calls else None


def _flag_default(tree: ast.AST, dest: str) -> ast.Constant | None:
    """The string ``default=`` of the argparse flag whose value lands in ``args.<dest>`` (``--dtype``)."""
    for call in ast.walk(tree):
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "add_argument"
        ):
            continue
        longs = [
            a.value.lstrip("-").replace("-", "_")
            for a in call.args
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")
        ]
        named = [
            k.value.value
            for k in call.keywords
            if k.arg == "dest" and isinstance(k.value, ast.Constant)
        ]
        default = next((k.value for k in call.keywords if k.arg == "default"), None)
        if (
            (named or longs or [None])[0] == dest
            and isinstance(default, ast.Constant)
            and isinstance(default.value, str)
        ):  # argparse's dest: its dest=, else its first long option
            return default
    return None


def _last_constant(tree: ast.AST, name: str, before: int) -> ast.Constant | None:
    """The string constant ``name`` is last assigned before line ``before`` (``dtype = 'float32'``), if any."""
    found = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        and n.lineno < before
        and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
    ]
    value = max(found, key=lambda n: n.lineno).value if found else None
    return value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None


def dtype_select(source: str, call: ast.Call, dtype: str) -> tuple[int, str] | None:
    """Where the script picks the dtype its own autocast ``call`` takes by name — ``dtype=ptdtype`` with
    ``ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, …}[args.dtype]`` (llm.c) — as the one
    line that makes it pick ``dtype`` (``torch.bfloat16``): ``(line, new text)``, its flag's default or the
    constant its key is assigned set to the key (``'bfloat16'``). ``None``: the script names no such choice."""
    given = next((k.value for k in call.keywords if k.arg == "dtype"), None)
    if not isinstance(given, ast.Name):
        return None
    tree = ast.parse(source)
    found = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        and n.lineno < call.lineno
        and any(isinstance(t, ast.Name) and t.id == given.id for t in n.targets)
    ]
    pick = max(found, key=lambda n: n.lineno).value if found else None
    if not (isinstance(pick, ast.Subscript) and isinstance(pick.value, ast.Dict)):
        return None
    key = next(
        (
            k.value
            for k, v in zip(pick.value.keys, pick.value.values)
            if isinstance(k, ast.Constant) and isinstance(k.value, str) and ast.unparse(v) == dtype
        ),
        None,
    )
    chosen = pick.slice
    const = (
        _flag_default(tree, chosen.attr)
        if isinstance(chosen, ast.Attribute)
        else _last_constant(tree, chosen.id, call.lineno)
        if isinstance(chosen, ast.Name)
        else None
    )
    if (
        key is None
        or const is None
        or const.lineno != const.end_lineno
        or const.end_col_offset is None
    ):
        return None
    raw = source.splitlines(keepends=True)[const.lineno - 1].encode("utf-8")
    quote = '"' if raw[const.col_offset : const.col_offset + 1] == b'"' else "'"
    text = (
        raw[: const.col_offset]
        + f"{quote}{key}{quote}".encode("utf-8")
        + raw[const.end_col_offset :]
    )
    return const.lineno, text.decode("utf-8")
