"""The argparse convention for the loop's own knobs, which no injection can turn, and for a precision chosen by
name (fast, in-process: a real argparse parse under the agent's recorder, then the analyst's mapping).

A fix that needs the training loop changed (accumulation, checkpointing, ``no_sync``, a larger batch, CUDA graphs)
is measured through the script's own flag when one is named for it *and* its value reaches the place in the loop
that does it; a step's samples are kept as the fix means them, whichever way the script counts its batch."""

from __future__ import annotations

from pathlib import Path

from advisors.experiments.script_fixes import script_patched, why_not_applied
from advisors.fixes.conventions import knob_change
from advisors.fixes import spec_of
from advisors.fixes.base import Times
from advisors.fixes.context import ScriptContext
from advisors.fixes import FIXES
from profilers.run.script_spec import ScriptSpec
from tests.advisors.experiments.test_script_knobs import recorded

# The batch flag counts the whole step: the loader gets batch // accum (as sample_runs.train does).
SPLIT = """import argparse, contextlib
import torch
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader
p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--grad-accum-steps", type=int, default=1)
p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
p.add_argument("--activation-checkpointing", action="store_true")
p.add_argument("--ddp-no-sync", action="store_true")
p.add_argument("--cuda-graphs", action="store_true")
p.add_argument("--compile", action="store_true")
args = p.parse_args()
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
loader = DataLoader(list(range(64)), batch_size=args.batch_size // args.grad_accum_steps)
model = torch.nn.Linear(2, 2)
ddp = None
if args.activation_checkpointing:
    checkpoint(model, torch.ones(1, 2), use_reentrant=False)
if args.compile or args.cuda_graphs:
    model = torch.compile(model, mode="reduce-overhead" if args.cuda_graphs else None)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i, x in enumerate(loader):
    last = (i + 1) % args.grad_accum_steps == 0
    sync = ddp.no_sync() if ddp is not None and args.ddp_no_sync and not last else contextlib.nullcontext()
    with torch.autocast("cpu", dtype=DTYPES[args.precision], enabled=args.precision != "fp32"):
        pass
    if (i + 1) % args.grad_accum_steps == 0:
        opt.step()
"""
# The batch flag is the micro-batch; accumulation multiplies it (Hugging Face's way).
MICRO = """import argparse
import torch
from torch.utils.data import DataLoader
p = argparse.ArgumentParser()
p.add_argument("--bs", type=int, default=32)
p.add_argument("--accum-steps", type=int, default=2)
args = p.parse_args()
loader = DataLoader(list(range(64)), batch_size=args.bs)
opt = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
for i, x in enumerate(loader):
    if (i + 1) % args.accum_steps == 0:
        opt.step()
"""
CMD = ("python", "train.py")


def _change(tmp_path: Path, source: str, fix: str, argv: list[str] | None = None):  # type: ignore[no-untyped-def]
    config = recorded(tmp_path, source, argv or [])
    inj = spec_of(fix).own_flag if fix in FIXES else None
    knobs = inj.knobs(ScriptContext()) if inj is not None else {"autocast": fix}
    return knob_change(
        knobs,
        config,
        (*CMD, *(argv or [])),
        str(tmp_path),
        inj.proof if inj is not None else "autocast",
    )


def test_accumulation_keeps_the_steps_samples_where_the_batch_counts_the_step(
    tmp_path: Path,
) -> None:
    c = _change(tmp_path, SPLIT, "grad_accumulation")
    assert c.command == (*CMD, "--grad-accum-steps", "2") and c.flags == ("--grad-accum-steps 2",)
    assert c.observe == {
        "grad_accum_steps": 2,
        "batch_size": 16,
    }  # two micro-batches of 16 per step
    c = _change(tmp_path, SPLIT, "grad_accumulation_x4", ["--grad-accum-steps", "2"])
    assert c.command == (*CMD, "--grad-accum-steps", "8") and c.observe["batch_size"] == 4


def test_accumulation_divides_a_micro_batch_flag(tmp_path: Path) -> None:
    c = _change(tmp_path, MICRO, "grad_accumulation")
    assert c.command == (
        *CMD,
        "--accum-steps",
        "4",
        "--bs",
        "16",
    )  # 32 × 2 = 64 per step, as before
    assert c.observe == {"grad_accum_steps": 4, "batch_size": 16}
    assert (
        _change(tmp_path, MICRO, "grad_accumulation", ["--bs", "3"]) is None
    )  # 3 × 2 samples cannot split in 4


def test_no_sync_and_a_larger_batch_keep_or_grow_what_they_mean(tmp_path: Path) -> None:
    c = _change(
        tmp_path, SPLIT, "ddp_no_sync"
    )  # the same micro-batch, four per step, one all-reduce
    assert c.command == (*CMD, "--ddp-no-sync", "--grad-accum-steps", "4", "--batch-size", "128")
    assert c.observe == {"ddp_no_sync": True, "grad_accum_steps": 4, "batch_size": 32}
    c = _change(tmp_path, MICRO, "larger_batch")
    assert c.command == (*CMD, "--bs", "64") and c.observe == {"batch_size": 64}
    assert _change(tmp_path, SPLIT, "larger_batch").command == (*CMD, "--batch-size", "64")


def test_switches_map_where_their_value_guards_the_call(tmp_path: Path) -> None:
    assert _change(tmp_path, SPLIT, "activation_checkpointing").command == (
        *CMD,
        "--activation-checkpointing",
    )
    assert _change(tmp_path, SPLIT, "cuda_graphs").command == (*CMD, "--cuda-graphs")
    assert (
        _change(tmp_path, MICRO, "activation_checkpointing") is None
    )  # no such flag: advice stays advice


def test_a_precision_flag_with_choices_takes_the_fixs_dtype_by_its_word(tmp_path: Path) -> None:
    c = _change(tmp_path, SPLIT, "bf16")
    assert c.command == (*CMD, "--precision", "bf16") and c.observe == {"autocast": "bf16"}
    assert _change(tmp_path, SPLIT, "fp16").command == (*CMD, "--precision", "fp16")
    assert _change(tmp_path, MICRO, "bf16") is None


def test_a_flag_only_fix_is_a_candidate_through_its_flag_and_proven_by_the_agent(
    tmp_path: Path,
) -> None:
    config = recorded(tmp_path, SPLIT, [])
    spec = ScriptSpec(command=CMD, cwd=str(tmp_path))
    patched = script_patched(spec, FIXES["grad_accumulation"], ScriptContext(config=config))
    assert (
        patched is not None
        and patched.command[-2:] == ("--grad-accum-steps", "2")
        and not patched.inject
    )
    assert (
        script_patched(spec, FIXES["grad_accumulation"], ScriptContext()) is None
    )  # no recorded flag: none
    acted = {
        "knobs": {
            "grad_accum_steps": {"acted": False, "why": "1 backward pass(es) per optimizer step"}
        }
    }
    assert (
        why_not_applied(FIXES["grad_accumulation"], acted)
        == "1 backward pass(es) per optimizer step"
    )
    assert Times(2).factor == 2


# llm.c's train_gpt2.py: a dtype chosen by name into ``ptdtype`` for its autocast, and ``--compile`` as an int
LLMC = """import argparse
from contextlib import nullcontext
import torch
DEVICE = "{device}"
p = argparse.ArgumentParser()
p.add_argument("--dtype", type=str, default="float32", choices=("float32", "float16", "bfloat16"))
p.add_argument("--compile", type=int, default=0)
args = p.parse_args()
model = torch.nn.Linear(4, 4)
if args.compile:
    model = torch.compile(model)
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
ctx = torch.autocast(device_type="cpu", dtype=ptdtype) if DEVICE == "cpu" else nullcontext()
with ctx:
    pass
"""


def test_llm_c_terms_its_dtype_by_name_and_its_int_compile_switch(tmp_path: Path) -> None:
    """Issue 42: llm.c's bf16 change rewrote its ``ctx`` line to ``dtype=torch.bfloat16`` (its own ``--dtype``
    stopped working) and its ``--compile 1`` was not recognised as the script's own switch."""
    c = _change(tmp_path, LLMC.replace("{device}", "cpu"), "bf16")
    assert (
        c is not None
        and c.command == (*CMD, "--dtype", "bfloat16")
        and c.observe == {"autocast": "bf16"}
    )
    # where: the line the flag acts on (its autocast through ``ptdtype``), not the parser's (llm.c said 810 for 630)
    assert c.line == 13 and c.where() is not None and c.where()["line"] == 13
    # where its autocast is a nullcontext on this device the flag changes nothing: the fix is injected instead
    assert _change(tmp_path, LLMC.replace("{device}", "cuda"), "bf16") is None
    config = recorded(tmp_path, LLMC.replace("{device}", "cpu"), [])
    compiled = knob_change({"compile": True}, config, CMD, str(tmp_path), "compile")
    assert compiled is not None and compiled.command == (*CMD, "--compile", "1")
    assert compiled.line == 10  # ``if args.compile:``
