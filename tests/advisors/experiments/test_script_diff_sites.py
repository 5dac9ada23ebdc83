"""The diff edits the line that ran, in the script's own terms: torch.compile after the model the run built (the
branch it took, from the agent's ``model_build`` site), autocast on the device the script moves things to
(``args.device``), and a dtype the script chooses by name (llm.c's ``ptdtype`` from ``--dtype``) chosen there."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from typing import Any

import pytest

from advisors.experiments.script_diff import render
from advisors.experiments.script_fixes import where_for
from advisors.experiments.script_terms import device_near, ran_build
from advisors.fixes import FIXES
from advisors.fixes.context import ScriptContext

# makemore's shape: one model per --type, each built in its own branch, then moved with the script's device flag
MAKEMORE = """import argparse
import torch
from torch import nn


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


class MLP(Transformer):
    pass


class BoW(Transformer):
    pass


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--type', type=str, default='transformer')
    parser.add_argument('--device', type=str, default='cpu')
    args = parser.parse_args()
    if args.type == 'transformer':
        model = Transformer()
    elif args.type == 'mlp':
        model = MLP()
    elif args.type == 'bow':
        model = BoW()
    else:
        raise ValueError(f'model type {args.type} is not recognized')
    model.to(args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(3):
        X = torch.randn(8, 4).to(args.device)
        logits = model(X)
        loss = logits.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
"""

# llm.c's train_gpt2.py: its autocast off on the CPU, its dtype chosen by name from --dtype into ptdtype
LLMC = """import argparse
from contextlib import nullcontext
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--device", type=str, default="", help="by default we autodetect, or set it here")
parser.add_argument("--dtype", type=str, default="float32", help="float32|float16|bfloat16")
args = parser.parse_args()
device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
ctx = torch.amp.autocast(device_type=device_type, dtype=ptdtype) if device_type == "cuda" else nullcontext()
model = nn.Linear(4, 2)
model.to(device)
with ctx:
    loss = model(torch.randn(8, 4).to(device)).sum()
"""


def _line(source: str, text: str) -> int:
    return next(i for i, x in enumerate(source.splitlines(), 1) if x.strip() == text)


def _added(text: str) -> list[str]:
    return [x[1:] for x in text.splitlines() if x.startswith("+") and not x.startswith("+++")]


def _after(text: str, added: str) -> str:
    """The diff line just before ``added`` (its context: the line it follows)."""
    lines = text.splitlines()
    return lines[lines.index("+" + added) - 1]


@pytest.fixture
def makemore(tmp_path: Path, injected: Any) -> tuple[Path, dict[str, Any]]:
    """makemore's shape run for real under the agent with ``--type mlp``: the script and its injection report."""
    script = tmp_path / "makemore.py"
    script.write_text(MAKEMORE)
    inj = injected({})
    argv = sys.argv
    sys.argv = [str(script), "--type", "mlp"]
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = argv
    return script, inj.finish()


def test_compile_lands_after_the_model_the_run_built_not_in_a_branch_it_skipped(
    makemore: tuple[Path, dict[str, Any]],
) -> None:
    script, report = makemore
    built = report["sites"]["model_build"]
    assert built["line"] == _line(MAKEMORE, "model.to(args.device)")
    assert built["built"]["line"] == _line(MAKEMORE, "model = MLP()")  # the mlp branch, which ran
    ctx = ScriptContext(sites=report["sites"], all_sites=report["all_sites"])
    where = where_for(FIXES["torch_compile"], ctx)
    assert where is not None and where["target"] == "model_build"
    assert where["line"] == _line(MAKEMORE, "model.to(args.device)")
    change = render(FIXES["torch_compile"], {"compile": True}, "model_call", where)
    assert change.kind == "diff" and _added(change.text) == ["    model = torch.compile(model)"]
    assert _after(change.text, "    model = torch.compile(model)") == "     model.to(args.device)"
    # the bf16 diff: the script's own device flag, as autocast's device_type, around the training call
    bf16 = render(
        FIXES["bf16_autocast"],
        {"autocast": "bf16"},
        "model_call",
        where_for(FIXES["bf16_autocast"], ctx),
    )
    assert (
        _added(bf16.text)[0]
        == "        with torch.autocast(device_type=torch.device(args.device).type, dtype=torch.bfloat16):"
    )
    assert "'cpu'" not in "".join(_added(bf16.text))


def test_a_recorded_construction_without_a_move_is_edited_in_its_own_branch(
    makemore: tuple[Path, dict[str, Any]],
) -> None:
    script, report = makemore
    mlp = _line(MAKEMORE, "model = MLP()")
    sites = {
        **report["sites"],
        "model_build": {"file": str(script), "line": mlp, "code": "model = MLP()"},
    }
    where = where_for(FIXES["torch_compile"], ScriptContext(sites=sites))
    change = render(FIXES["torch_compile"], {"compile": True}, "model_call", where)
    assert _after(change.text, "        model = torch.compile(model)") == "         model = MLP()"


def test_an_old_run_without_a_build_site_reads_the_file_as_before(
    makemore: tuple[Path, dict[str, Any]],
) -> None:
    _, report = makemore
    old = {k: v for k, v in report["sites"].items() if k != "model_build"}
    where = where_for(FIXES["torch_compile"], ScriptContext(sites=old))
    assert where is not None and where["line"] == _line(
        MAKEMORE, "model = BoW()"
    )  # the last assignment
    bf16 = render(
        FIXES["bf16_autocast"],
        {"autocast": "bf16"},
        "model_call",
        where_for(FIXES["bf16_autocast"], ScriptContext(sites=old)),
    )
    assert (
        "device_type=torch.device(args.device).type" in bf16.text
    )  # its batches' .to(args.device), nearby


def test_a_recorded_site_that_names_no_variable_falls_back(tmp_path: Path) -> None:
    f = tmp_path / "train.py"
    f.write_text("models = []\nmodels.append(Net())\nmodel = models[0]\nmodel(x)\n")
    assert ran_build({"file": str(f), "line": 2}) is None
    built = ran_build({"file": str(f), "line": 2, "built": {"file": str(f), "line": 3}})
    assert (
        built is not None and built["name"] == "model" and built["line"] == 3
    )  # its construction instead
    assert ran_build({"file": str(tmp_path / "gone.py"), "line": 1}) is None


@pytest.mark.parametrize(
    ("assigned", "expected"),
    [
        ("dev = 'cuda' if torch.cuda.is_available() else 'cpu'", "dev"),
        ("dev = torch.device('cuda')", "dev.type"),
        ("dev = 'cuda:0'", "torch.device(dev).type"),
    ],
)
def test_the_device_moved_to_as_autocasts_device_type(assigned: str, expected: str) -> None:
    source = f"import torch\n{assigned}\nmodel = Net().to(dev)\nx = x.to(torch.bfloat16)\nout = model(x)\n"
    assert device_near(source, 5, (3,)) == expected
    assert (
        device_near(source, 5) == expected
    )  # unrecorded: the nearest .to(<device>), not the dtype cast
    assert device_near("out = model(x)\n", 1) is None


def _llmc_site(f: Path) -> dict[str, Any]:
    line = _line(LLMC, "loss = model(torch.randn(8, 4).to(device)).sum()")
    return {"file": str(f), "line": line, "code": "loss = ...", "grad": True}


@pytest.mark.parametrize(("knob", "word"), [("bf16", "bfloat16"), ("fp16", "float16")])
def test_a_dtype_chosen_by_name_is_chosen_by_its_flag_not_hard_coded(
    tmp_path: Path, knob: str, word: str
) -> None:
    f = tmp_path / "train_gpt2.py"
    f.write_text(LLMC)
    fix = FIXES["bf16_autocast" if knob == "bf16" else "fp16_autocast"]
    change = render(
        fix, {"autocast": knob}, "model_call", {**_llmc_site(f), "target": "model_call"}
    )
    added = _added(change.text)
    assert added == [
        f'parser.add_argument("--dtype", type=str, default="{word}", help="float32|float16|bfloat16")',
        "ctx = torch.amp.autocast(device_type=device_type, dtype=ptdtype)",
    ]
    assert "torch.bfloat16" not in "".join(added) and f.read_text() == LLMC


def test_the_scripts_own_autocast_keeps_its_dtype_variable(tmp_path: Path) -> None:
    flag = 'parser.add_argument("--dtype", type=str, default="float32", help="float32|float16|bfloat16")'
    source = LLMC.replace(
        flag, 'parser.add_argument("--amp", action="store_true")\ndtype = "float32"'
    )
    source = source.replace("[args.dtype]", "[dtype]").replace(
        "with ctx:",
        "with torch.autocast(device_type=device_type, dtype=ptdtype, enabled=args.amp):",
    )
    f = tmp_path / "train.py"
    f.write_text(source)
    line = _line(source, "loss = model(torch.randn(8, 4).to(device)).sum()")
    change = render(
        FIXES["bf16_autocast"],
        {"autocast": "bf16"},
        "model_call",
        {"file": str(f), "line": line, "grad": True, "target": "model_call"},
    )
    assert _added(change.text) == [
        'dtype = "bfloat16"',
        "with torch.autocast(device_type=device_type, dtype=ptdtype, enabled=True):",
    ]
    # a choice the script makes at run time (nanoGPT's dtype from what the GPU supports): the dtype is written out
    f.write_text(
        source.replace(
            'dtype = "float32"', 'dtype = "bfloat16" if torch.cuda.is_available() else "float16"'
        )
    )
    change = render(
        FIXES["bf16_autocast"],
        {"autocast": "bf16"},
        "model_call",
        {"file": str(f), "line": line, "grad": True, "target": "model_call"},
    )
    assert _added(change.text) == [
        "with torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=True):"
    ]
