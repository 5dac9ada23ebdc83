"""Hand-written attention in a ``forward``'s source: a ``softmax`` between two matmuls.

Standard library only: the agent reads a live module's forward (``inspect.getsource``), the
analysis reads the file and line a run's per-module record names; both ask :func:`recognise`.

The source is parsed, never run. Operations are ordered as Python evaluates them (a node ends after
its operands), so ``softmax(q @ k.T) @ v`` on one line reads matmul → softmax → matmul. A matmul is
``@``, ``matmul``/``bmm``/``einsum`` calls; a causal mask is a ``masked_fill`` or a ``tril``
(``torch.tril`` / a ``bias`` buffer built with it); dropout is any call whose name holds ``drop``.
A forward that already calls ``scaled_dot_product_attention`` is not hand-written.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

_MATMUL_CALLS = ("matmul", "bmm", "einsum", "baddbmm")
SDPA = "scaled_dot_product_attention"


@dataclass(frozen=True)
class HandAttention:
    """What the forward does: ``line`` is the softmax's line within the source given (1 = its
    first line); ``causal``: a mask is applied before the softmax; ``dropout``: something named
    for dropout runs between the softmax and the second matmul."""

    line: int
    causal: bool
    dropout: bool

    def describe(self) -> str:
        parts = ["matmul", "scale"] + (["mask"] if self.causal else []) + ["softmax"]
        parts += (["dropout"] if self.dropout else []) + ["matmul"]
        return " → ".join(parts)


def _name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _kind(node: ast.AST) -> str | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return "matmul"
    if not isinstance(node, ast.Call):
        return None
    name = _name(node).lower()
    if name in _MATMUL_CALLS:
        return "matmul"
    if name in ("softmax", "_softmax"):
        return "softmax"
    if name in ("masked_fill", "masked_fill_", "tril"):
        return "mask"
    if "drop" in name:
        return "dropout"
    if name == SDPA:
        return "sdpa"
    return None


def _ops(tree: ast.AST) -> list[tuple[tuple[int, int], str, int]]:
    """((end line, end column), kind, line) of every operation, in evaluation order."""
    out = []
    for node in ast.walk(tree):
        kind = _kind(node)
        if kind is not None:
            end = (
                getattr(node, "end_lineno", None) or node.lineno,  # type: ignore[attr-defined]
                getattr(node, "end_col_offset", None) or 0,
            )
            out.append((end, kind, node.lineno))  # type: ignore[attr-defined]
    return sorted(out)


def parse_forward(source: str) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None


def recognise(source: str) -> tuple[HandAttention | None, str]:
    """The hand-written attention in ``source`` (a ``forward``'s text), or ``None`` and why not."""
    tree = parse_forward(source)
    if tree is None:
        return None, "its forward's source does not parse"
    ops = _ops(tree)
    kinds = [k for _, k, _ in ops]
    if "sdpa" in kinds:
        return None, f"its forward already calls {SDPA}"
    for i, (_, kind, line) in enumerate(ops):
        if kind != "softmax":
            continue
        before, after = kinds[:i], kinds[i + 1 :]
        if "matmul" not in before or "matmul" not in after:
            continue
        last = len(before) - 1 - before[::-1].index("matmul")
        until = after.index("matmul")
        return HandAttention(
            line=line, causal="mask" in before[last:], dropout="dropout" in after[:until]
        ), "softmax between two matmuls"
    if "softmax" not in kinds:
        return None, "its forward has no softmax"
    return None, "its forward's softmax is not between two matmuls"


def forward_block(lines: list[str], first: int) -> str | None:
    """The source of the function starting at line ``first`` (1-based) of a file's ``lines``: the
    ``def`` and every line indented below it."""
    if not 1 <= first <= len(lines):
        return None
    head = lines[first - 1]
    indent = len(head) - len(head.lstrip())
    body = [head]
    i = first
    while i < len(lines) and not head.rstrip().endswith(":"):  # a signature over several lines
        head = lines[i]
        body.append(head)
        i += 1
    for line in lines[i:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    while body and not body[-1].strip():  # the blank lines before the next definition
        body.pop()
    return "".join(body)
