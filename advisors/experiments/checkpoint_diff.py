"""The ``activation_checkpointing`` fix as an edit of the line that calls the block.

The agent records the line of the user's code that made the first checkpointed call
(``x = block(x)`` in the model's forward). A line that is one assignment of one call,
``NAME = CALLEE(ARGS)``, becomes ``NAME = checkpoint(CALLEE, ARGS, use_reentrant=False)`` and the
file imports ``checkpoint`` from ``torch.utils.checkpoint`` after its last top-level import (unless
it already does). Any other shape of line: ``None`` (the caller shows the fix's snippet there).
"""

from __future__ import annotations

import ast
from typing import Any, Mapping

IMPORT = "from torch.utils.checkpoint import checkpoint\n"


def _imports_checkpoint(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.ImportFrom)
        and n.module == "torch.utils.checkpoint"
        and any(a.name == "checkpoint" and a.asname is None for a in n.names)
        for n in tree.body
    )


def checkpoint_edit(source: str, site: Mapping[str, Any]) -> str | None:
    """``source`` with the call at ``site["line"]`` checkpointed (see the module docs)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    line = int(site.get("line") or 0)
    found = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and n.lineno == line and n.end_lineno == line
    ]
    if len(found) != 1 or not isinstance(found[0].value, ast.Call):
        return None
    call = found[0].value
    if not call.args or call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    lines = source.splitlines(keepends=True)
    text = lines[line - 1]
    start, end = call.col_offset, call.end_col_offset
    if end is None or text[end:].strip():  # a comment after the call: not one call alone
        return None
    args = ", ".join(ast.get_source_segment(source, a) or "" for a in call.args)
    new = f"checkpoint({ast.get_source_segment(source, call.func)}, {args}, use_reentrant=False)"
    lines[line - 1] = text[:start] + new + text[end:]
    if not _imports_checkpoint(tree):
        last = max(
            (
                n.end_lineno or n.lineno
                for n in tree.body
                if isinstance(n, ast.Import | ast.ImportFrom)
            ),
            default=0,
        )
        lines.insert(last, IMPORT)
    return "".join(lines)
