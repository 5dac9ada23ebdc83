"""A launch-bound step gets CUDA graphs (reduce-overhead compile) as its first fix, with its own bound, and the fix is
injected into a script — through the script's own compile flags where it has them. On a CPU it is said not to
apply ("CUDA graphs need a GPU"), never timed as an ordinary compile. All on the CPU, from a real H100 trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from advisors.diagnosis import bound_for, diagnose, diagnosis_json
from advisors.experiments.script_diff import render
from advisors.experiments.script_fixes import not_injectable, script_patched, why_not_applied
from advisors.fixes.context import ScriptContext
from advisors.fixes.conventions import knob_change
from advisors.experiments.script_strategy import ScriptStrategy
from advisors.fixes import FIXES
from advisors.observation import observe
from profilers.run.script_spec import ScriptSpec

BERT = (
    Path(__file__).resolve().parents[4]
    / "shared"
    / "traces"
    / "host"
    / "tracelens_h100_bert-small.json.gz"
)
GRAPHS = {"compile": True, "compile_mode": "reduce-overhead"}


@pytest.fixture(scope="module")
def bert() -> Any:
    return diagnose(observe(BERT))


def test_the_launch_bound_trace_gets_cuda_graphs_first_with_the_launch_gaps_as_its_bound(
    bert: Any,
) -> None:
    """bert-small on an H100: GPU busy 7%, 60 kernels of ~5 µs a step, 69 µs of GPU idle per launch."""
    assert bert.bottleneck.value == "host" and bert.binding.rule == "HOST001"
    doc = diagnosis_json(bert)
    first = doc["ranking"]["fix_order"][0]
    assert (
        first["fix"] == "cuda_graphs" and first["effort"] == "config"
    )  # one line: torch.compile(mode=...)
    lead = doc["findings"][0]
    assert lead["fix"]["id"] == "cuda_graphs" and 'mode="reduce-overhead"' in lead["fix"]["snippet"]
    assert 'torch.compile(model, mode="reduce-overhead")' in lead["message"]
    assert lead["evidence"]["idle_per_launch_us"] == pytest.approx(68.6, abs=1.0)
    own = bert.bounds["cuda_graphs"]  # the fix's own bound: the launch gaps vanishing
    assert own.share == pytest.approx(0.93, abs=0.005) and "launch gaps" in own.assumption
    assert lead["fix_bound"] == own.to_json()
    bound = bound_for(
        bert, "cuda_graphs"
    )  # the one every surface shows: here the same 14.3x as the finding's
    assert bound is not None and bound.speedup == own.speedup == pytest.approx(14.3, abs=0.1)
    assert lead["upper_bound_speedup"] == bound.speedup
    # the host-work rule saw the same time: its "find that host code" advice is not the lead
    assert [r["rule"] for r in lead["rules"]] == ["HOST003"]


def test_cuda_graphs_is_injected_into_a_script_on_cuda(bert: Any) -> None:
    assert not_injectable(FIXES["cuda_graphs"]) is None
    spec = ScriptSpec(command=("python", "train.py"), cwd="/x")
    cuda = ScriptContext(device="cuda")
    patched = script_patched(spec, FIXES["cuda_graphs"], cuda)
    assert patched is not None and dict(patched.inject) == GRAPHS
    strategy = ScriptStrategy(spec, "cuda")
    assert [f.id for f in strategy.candidates(bert, spec, set())][:1] == ["cuda_graphs"]
    assert "cuda_graphs" not in [
        f.id for f, _ in strategy.advice(bert)
    ]  # not "change it yourself" any more
    # on a CPU nothing is compiled under this fix's name: only the mode is asked, which the agent refuses
    on_cpu = script_patched(spec, FIXES["cuda_graphs"], ScriptContext(device="cpu"))
    assert on_cpu is not None and dict(on_cpu.inject) == {"compile_mode": "reduce-overhead"}


def test_on_a_cpu_the_injection_says_cuda_graphs_need_a_gpu_and_compiles_nothing(
    injected: Any,
) -> None:
    from torch._dynamo.utils import counters

    before = counters["stats"].get("unique_graphs", 0)
    inj = injected({"compile_mode": "reduce-overhead"})
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(torch.randn(8, 4)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        inj.on_step()
    report = inj.finish()
    knob = report["knobs"]["compile_mode"]
    assert (
        not knob["acted"] and knob["refused"] and knob["why"].startswith("CUDA graphs need a GPU")
    )
    assert (
        counters["stats"].get("unique_graphs", 0) == before
    )  # no ordinary compile timed under this name
    assert why_not_applied(FIXES["cuda_graphs"], report) == knob["why"]


FLAGS = """import argparse
import torch
parser = argparse.ArgumentParser()
parser.add_argument("--compile", action="store_true")
parser.add_argument("--compile_mode", default="default")
args = parser.parse_args()
model = torch.nn.Linear(2, 2)
if args.compile:
    model = torch.compile(model, mode=args.compile_mode)
"""


def test_the_scripts_own_compile_flags_carry_cuda_graphs(tmp_path: Path) -> None:
    from tests.advisors.experiments.test_script_knobs import hf_config, recorded

    config = recorded(tmp_path, FLAGS, [])
    change = knob_change(GRAPHS, config, ("python", "train.py"), str(tmp_path), "compile_mode")
    assert change is not None and change.command == (
        "python",
        "train.py",
        "--compile",
        "--compile_mode",
        "reduce-overhead",
    )
    assert change.observe == GRAPHS and change.convention == "argparse"
    only_compile = recorded(tmp_path, FLAGS.replace(", mode=args.compile_mode", ""), [])
    assert (
        knob_change(GRAPHS, only_compile, ("python", "train.py"), str(tmp_path), "compile_mode")
        is None
    )
    hf = knob_change(
        GRAPHS,
        hf_config(["torch_compile", "torch_compile_mode"]),
        ("python", "run.py"),
        "/x",
        "compile_mode",
    )
    assert hf is not None and hf.command[2:] == (
        "--torch_compile",
        "--torch_compile_mode",
        "reduce-overhead",
    )


def test_the_change_to_make_is_a_reduce_overhead_compile_where_the_model_is_built(
    tmp_path: Path,
) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nmodel = torch.nn.Linear(2, 2)\nfor _ in range(3):\n    model(torch.ones(2))\n"
    )
    where = {
        "file": str(script),
        "line": 2,
        "end": 2,
        "col": 0,
        "name": "model",
        "target": "model_build",
    }
    change = render(FIXES["cuda_graphs"], GRAPHS, "model_call", {**where, "all": [where]})
    assert change.kind == "diff"
    assert "+model = torch.compile(model, mode='reduce-overhead')" in change.text.splitlines()
