"""``activation_checkpointing`` as an edit of the user's file: the line that calls the block
becomes ``checkpoint(block, x, use_reentrant=False)``, with its import; another shape of line
gets the snippet there."""

from __future__ import annotations

from pathlib import Path

from advisors.experiments.checkpoint_diff import checkpoint_edit
from advisors.experiments.script_diff import render
from advisors.fixes import FIXES

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "mlp_blocks_train.py"


def _line(source: str, code: str) -> int:
    return next(i for i, s in enumerate(source.splitlines(), 1) if s.strip() == code)


def test_the_block_call_is_checkpointed_and_checkpoint_imported() -> None:
    source = SCRIPT.read_text()
    line = _line(source, "x = block(x)")
    new = checkpoint_edit(source, {"line": line})
    assert new is not None
    added = [s for s in new.splitlines() if s not in source.splitlines()]
    assert added == [
        "from torch.utils.checkpoint import checkpoint",
        "            x = checkpoint(block, x, use_reentrant=False)",
    ]
    assert new.index("from torch.utils.checkpoint") > new.index("from torch.nn import functional")
    imported = "from torch.utils.checkpoint import checkpoint\n" + source  # imported once
    again = checkpoint_edit(imported, {"line": line + 1})
    assert again is not None and again.count("import checkpoint") == 1


def test_other_lines_are_not_edited() -> None:
    source = "import torch\ndef f(m, x):\n    return m(x)\ny = g(a, k=1)\nz = h(*xs)\n"
    assert checkpoint_edit(source, {"line": 3}) is None  # not an assignment
    assert checkpoint_edit(source, {"line": 4}) is None  # a keyword argument
    assert checkpoint_edit(source, {"line": 5}) is None


def test_render_gives_the_diff_at_the_recorded_call() -> None:
    source = SCRIPT.read_text()
    line = _line(source, "x = block(x)")
    site = {"file": str(SCRIPT), "line": line, "code": "x = block(x)", "target": "checkpoint"}
    change = render(
        FIXES["activation_checkpointing"], {"checkpoint_modules": "blocks.*"}, "checkpoint", site
    )
    assert change.kind == "diff" and change.line == line
    assert "+            x = checkpoint(block, x, use_reentrant=False)" in change.text
