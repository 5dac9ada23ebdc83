"""The ``sdpa_attention`` fix as an edit of the user's own attention lines.

From the softmax line the agent recorded (and what its replacement called SDPA with: causal, the
attention dropout's attribute), the function around it is parsed: the statements from the one
holding the first matmul up to the one holding the second are the hand-written attention. The
statements before the second only assign the score tensor (``att = …``; nothing after reads them);
they are removed and the second matmul becomes
``F.scaled_dot_product_attention(q, k, v, is_causal=…, dropout_p=…)``, with ``q``, ``k`` and ``v``
as the user's code names them (``k`` from ``k.transpose(-2, -1)`` / ``k.mT`` / ``k.T``). Any other
shape of code: ``None`` (the caller shows the fix's snippet at the line instead).
"""

from __future__ import annotations

import ast
from typing import Any, Mapping

_FUNCTIONAL = "torch.nn.functional"


def _functional(tree: ast.Module) -> str:
    """How the file names ``torch.nn.functional`` (``F`` where it imports it so)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "torch.nn":
            alias = next((a for a in node.names if a.name == "functional"), None)
            if alias is not None:
                return alias.asname or "functional"
        if isinstance(node, ast.Import):
            alias = next((a for a in node.names if a.name == _FUNCTIONAL and a.asname), None)
            if alias is not None and alias.asname:
                return alias.asname
    return _FUNCTIONAL


def _is_matmul(node: ast.AST) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult)


def _untransposed(node: ast.expr) -> ast.expr | None:
    """``k`` of ``k.transpose(-2, -1)``, ``k.transpose(2, 3)``, ``k.mT`` or ``k.T``."""
    if isinstance(node, ast.Attribute) and node.attr in ("mT", "T"):
        return node.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "transpose"
    ):
        return node.func.value
    return None


def _function_at(tree: ast.Module, line: int) -> ast.FunctionDef | None:
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.lineno <= line <= (node.end_lineno or 0):
            if found is None or node.lineno > found.lineno:
                found = node
    return found


def _matmuls(stmt: ast.stmt) -> list[ast.BinOp]:
    return [n for n in ast.walk(stmt) if isinstance(n, ast.BinOp) and _is_matmul(n)]


def sdpa_edit(source: str, site: Mapping[str, Any]) -> str | None:
    """``source`` with the hand-written attention at ``site`` (its softmax line) replaced."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    fn = _function_at(tree, int(site["line"]))  # the innermost def around the softmax
    if fn is None:
        return None
    body = fn.body
    line = int(site["line"])
    at = next((i for i, s in enumerate(body) if s.lineno <= line <= (s.end_lineno or 0)), None)
    if at is None:
        return None
    first = next((i for i in range(at, -1, -1) if _matmuls(body[i])), None)
    last = next((i for i in range(at + 1, len(body)) if _matmuls(body[i])), None)
    if first is None or last is None:
        return None
    removed = body[first:last]
    names = set()
    for s in removed:
        if not (
            isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
        ):
            return None
        names.add(s.targets[0].id)
    scores = [n for n in _matmuls(body[first]) if _untransposed(n.right) is not None]
    second = [
        n for n in _matmuls(body[last]) if isinstance(n.left, ast.Name) and n.left.id in names
    ]
    if len(scores) != 1 or len(second) != 1:
        return None
    later = [n.id for s in body[last + 1 :] for n in ast.walk(s) if isinstance(n, ast.Name)]
    if names & set(later):  # the scores or weights are used after (returned, logged): keep them
        return None
    k = _untransposed(scores[0].right)
    assert k is not None
    own = fn.args.args[0].arg if fn.args.args else "self"
    args = [ast.unparse(scores[0].left), ast.unparse(k), ast.unparse(second[0].right)]
    if site.get("causal"):
        args.append("is_causal=True")
    if site.get("dropout"):
        args.append(f"dropout_p={own}.{site['dropout']}.p if {own}.training else 0.0")
    call = f"{_functional(tree)}.scaled_dot_product_attention({', '.join(args)})"
    lines = source.splitlines(keepends=True)
    m = second[0]
    if m.lineno != m.end_lineno:
        return None
    row = lines[m.lineno - 1].encode()  # ast's columns count UTF-8 bytes
    edited = row[: m.col_offset] + call.encode() + row[m.end_col_offset or 0 :]
    lines[m.lineno - 1] = edited.decode()
    start, end = removed[0].lineno, removed[-1].end_lineno or removed[-1].lineno
    return "".join(lines[: start - 1] + lines[end:])
