"""A kept script fix renders as a diff of the user's file at the recorded call."""

from __future__ import annotations

from pathlib import Path

from advisors.fixes import FIXES
from advisors.experiments.script_diff import render


SCRIPT = """import torch
from torch.utils.data import DataLoader

loader = DataLoader(
    ds,
    batch_size=32,
    num_workers=0,
)
opt = torch.optim.SGD(model.parameters(), lr=0.1, )
for x, y in loader:
    loss = loss_fn(model(x),
                   y)
"""


def test_dataloader_change_is_a_diff_of_the_users_call(tmp_path: Path) -> None:
    f = tmp_path / "train.py"
    f.write_text(SCRIPT)
    ch = render(
        FIXES["dataloader_workers"],
        {"num_workers": 4, "prefetch_factor": 4},
        "dataloader",
        {"file": str(f), "line": 4},
    )
    assert ch.kind == "diff" and ch.file == str(f)
    assert (
        "-    num_workers=0,\n+    num_workers=4,\n" in ch.text
    )  # an existing keyword's value replaced
    assert "+    prefetch_factor=4,\n )" in ch.text  # added in the call's own style, one per line
    assert f.read_text() == SCRIPT  # only read


def test_optimizer_keyword_added_after_a_trailing_comma(tmp_path: Path) -> None:
    f = tmp_path / "train.py"
    f.write_text(SCRIPT)
    ch = render(
        FIXES["foreach_optimizer"],
        {"optimizer_impl": "foreach"},
        "optimizer",
        {"file": str(f), "line": 9, "type": "SGD"},
    )
    assert "+opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=True )" in ch.text


def test_autocast_wraps_the_whole_statement(tmp_path: Path) -> None:
    f = tmp_path / "train.py"
    f.write_text(SCRIPT)
    ch = render(
        FIXES["bf16_autocast"], {"autocast": "bf16"}, "model_call", {"file": str(f), "line": 11}
    )
    assert (
        "+    with torch.autocast(device_type='cpu', dtype=torch.bfloat16):\n"
        "+        loss = loss_fn(model(x),\n+                       y)\n"
    ) in ch.text


NANOGPT_CTX = """\
import torch
from contextlib import nullcontext

device_type = 'cpu'
ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16}['float32']
ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)

def step(model, X, Y):
    with ctx:
        logits, loss = model(X, Y)
    loss.backward()
"""


def test_nanogpt_s_own_ctx_line_is_the_change_not_a_second_autocast(tmp_path: Path) -> None:
    """Issue 30: nanoGPT switches autocast off on a CPU (``ctx = nullcontext() if …``); the change is that line,
    to its own autocast with the fix's dtype — never a second ``torch.autocast`` nested inside ``with ctx:``."""
    f = tmp_path / "train.py"
    f.write_text(NANOGPT_CTX)
    ch = render(
        FIXES["bf16_autocast"], {"autocast": "bf16"}, "model_call", {"file": str(f), "line": 10}
    )
    assert ch.kind == "diff"
    removed = [
        line for line in ch.text.splitlines() if line.startswith("-") and not line.startswith("---")
    ]
    added = [
        line for line in ch.text.splitlines() if line.startswith("+") and not line.startswith("+++")
    ]
    assert removed == [
        "-ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, "
        "dtype=ptdtype)"
    ]
    assert added == ["+ctx = torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16)"]
    assert "with torch.autocast" not in ch.text


def test_without_a_readable_file_the_snippet_is_placed_at_the_line(tmp_path: Path) -> None:
    ch = render(
        FIXES["torch_compile"],
        {"compile": True},
        "model_call",
        {"file": str(tmp_path / "gone.py"), "line": 7},
    )
    assert (
        ch.kind == "snippet"
        and ch.text.startswith("# at gone.py:7\n")
        and "torch.compile" in ch.text
    )
    ch = render(FIXES["tf32"], {"matmul_precision": "high"}, None, None)
    assert ch.kind == "snippet" and "once, at start-up" in ch.text
