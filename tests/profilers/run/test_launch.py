"""The launcher profiles unmodified scripts: steps found by optimizer or backward, N profiled, a clean end."""

from __future__ import annotations

import gzip
import json
import textwrap
from pathlib import Path

import psutil
import pytest

from profilers.errors import RunError
from profilers.run.launch import boot_command, launch
from profilers.run.interpreter import resolve
from stepwise_agent.boot import PROFILE_WAIT, PROFILE_WARMUP
from profilers.run.records import RunStatus
from profilers.store.runs import RunStore
from profilers.trace.load import load_trace

STEPS = 3
WAIT_S = 240.0  # an upper bound for a stuck launch, not a timing assertion

# A DataLoader with worker processes, a torch.optim optimizer and gradient accumulation (2 backwards a step).
WITH_OPTIMIZER = textwrap.dedent("""
    import sys, torch
    from torch.utils.data import DataLoader, TensorDataset
    x, y = torch.randn(512, 16), torch.randint(0, 4, (512,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, num_workers=2)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(int(sys.argv[1])):
        for i, (xb, yb) in enumerate(loader):
            loss = torch.nn.functional.cross_entropy(model(xb), yb) / 2
            loss.backward()
            if i % 2 == 1:
                opt.step()
                opt.zero_grad()
    print("the script finished on its own")
""")

# No optimizer at all: a hand-written SGD update under no_grad.
HAND_WRITTEN_SGD = textwrap.dedent("""
    import torch
    w = torch.randn(16, 4, requires_grad=True)
    b = torch.zeros(4, requires_grad=True)
    x, y = torch.randn(256, 16), torch.randint(0, 4, (256,))
    for i in range(1000):
        loss = torch.nn.functional.cross_entropy(x @ w + b, y)
        loss.backward()
        with torch.no_grad():
            for p in (w, b):
                p -= 0.1 * p.grad
                p.grad = None
    print("the script finished on its own")
""")

RAISES = HAND_WRITTEN_SGD.replace(
    "    loss.backward()\n",
    "    loss.backward()\n    if i == 3:\n        raise ValueError('bad batch')\n",
)
assert RAISES != HAND_WRITTEN_SGD
NO_TRAINING = "print('hello, no training here')\n"


def _launch(tmp_path: Path, source: str, *args: str) -> tuple[RunStore, object, object]:
    script = tmp_path / "train.py"
    script.write_text(source)
    store = RunStore(tmp_path / "store")
    handle, result = launch(["python", str(script), *args], store, steps=STEPS, timeout_s=WAIT_S)
    return store, handle, result


def _profiler_steps(run_dir: Path) -> list[str]:
    (trace,) = sorted((run_dir / "tb").glob("rank0.*.pt.trace.json.gz"))
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    return sorted(e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))


def _leftovers(run_dir: Path) -> list[int]:
    out = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        if (
            str(run_dir) in " ".join(proc.info["cmdline"] or [])
            and proc.info["status"] != psutil.STATUS_ZOMBIE
        ):
            out.append(proc.info["pid"])
    return out


@pytest.mark.slow  # a real launched process; launch_boot in process: test_launch_in_process.py
@pytest.mark.parametrize(
    "source, mode, has_samples",
    [
        (WITH_OPTIMIZER, "optimizer", True),
        (HAND_WRITTEN_SGD, "backward", False),
    ],
    ids=["dataloader-and-optimizer", "hand-written-sgd"],
)
def test_unmodified_script_is_profiled_for_n_steps_and_ends_cleanly(
    tmp_path: Path, source: str, mode: str, has_samples: bool
) -> None:
    store, handle, result = _launch(tmp_path, source, "50")
    run_dir = Path(handle.run_dir)  # type: ignore[attr-defined]
    assert result.status is RunStatus.OK and result.exit_code == 0, result.error  # type: ignore[attr-defined]
    assert result.steps_done == PROFILE_WAIT + PROFILE_WARMUP + STEPS  # type: ignore[attr-defined]
    assert f"steps detected by {mode} calls" in result.warnings  # type: ignore[attr-defined]
    assert _profiler_steps(run_dir) == [f"ProfilerStep#{i}" for i in range(2, 2 + STEPS)]
    assert len(load_trace(run_dir).steps) == STEPS  # the trace engine reads the run folder as it is
    steps = store.read_steps(handle.run_id)  # type: ignore[attr-defined]
    assert list(steps["step"]) == list(range(2 + STEPS)) and int(steps["profiled"].sum()) == STEPS
    assert steps["loss"].notna().all()
    # A row's time is its step's start, as the trainer writes it: the next step starts after this one ended.
    starts, walls = steps["t_unix_ns"].astype("int64").to_numpy(), steps["wall_ms"].to_numpy()
    assert all(starts[i + 1] - starts[i] >= walls[i] * 1e6 - 0.5e6 for i in range(len(starts) - 1))
    assert (result.samples_per_s is not None) == has_samples  # type: ignore[attr-defined]
    if has_samples:
        assert set(steps["samples"]) == {32.0}  # two micro-batches of 16 per optimizer step
    assert "finished on its own" not in (run_dir / "stdout.log").read_text()
    assert store.get(handle.run_id).kind == "launch" and (run_dir / "launch.json").exists()  # type: ignore
    assert list(
        (run_dir / "tb").glob("events.out.tfevents.*")
    )  # TensorBoard scalars beside the trace
    assert _leftovers(run_dir) == []  # no DataLoader worker outlives the run


@pytest.mark.slow  # a real launched process; launch_boot in process: test_launch_in_process.py
def test_a_script_that_raises_is_failed_with_its_steps(tmp_path: Path) -> None:
    store, handle, result = _launch(tmp_path, RAISES)
    assert result.status is RunStatus.FAILED and "bad batch" in (result.error or "")  # type: ignore
    assert result.steps_done == 4 and len(store.read_steps(handle.run_id)) == 4  # type: ignore


@pytest.mark.slow  # a real launched process; launch_boot in process: test_launch_in_process.py
def test_a_script_without_training_is_failed(tmp_path: Path) -> None:
    _, _, result = _launch(tmp_path, NO_TRAINING)
    assert result.status is RunStatus.FAILED and "no training step" in (result.error or "")  # type: ignore


@pytest.mark.slow  # a real launched process; launch_boot in process: test_launch_in_process.py
def test_a_script_shorter_than_the_window_ends_ok_with_a_warning_and_its_trace(
    tmp_path: Path,
) -> None:
    _, handle, result = _launch(tmp_path, HAND_WRITTEN_SGD.replace("range(1000)", "range(3)"))
    assert result.status is RunStatus.OK and result.steps_done == 3  # type: ignore[attr-defined]
    assert any("before the 5 requested" in w for w in result.warnings)  # type: ignore[attr-defined]
    # torch closes the open step marker when profiling stops: the run says so rather than editing the trace
    assert _profiler_steps(Path(handle.run_dir)) == ["ProfilerStep#2", "ProfilerStep#3"]  # type: ignore
    assert any("ProfilerStep#3, is the script's ending" in w for w in result.warnings)  # type: ignore


def test_boot_command_shapes(tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text("pass")
    cmd = boot_command(["python3", "-u", "-X", "dev", str(script), "--lr", "1"], tmp_path, 4)
    # python3 is the one a shell finds on PATH (tests run as if this environment were activated)
    assert cmd == [
        resolve("python3"),
        "-u",
        "-X",
        "dev",
        "-m",
        "stepwise_agent.boot",
        str(tmp_path),
        "4",
        str(script),
        "--lr",
        "1",
    ]
    assert boot_command(["--", "python", "-m", "pkg.train"], tmp_path, 2)[-2:] == [
        "-m",
        "pkg.train",
    ]
    assert boot_command([str(script)], tmp_path, 2)[-1] == str(script)
    for bad in (
        ["bash", "x.sh"],
        ["python", "-c", "print(1)"],
        ["python", "missing.py"],
        [],
        ["python"],
    ):
        with pytest.raises(RunError):
            boot_command(bad, tmp_path, 2)


def test_accelerate_launch_runs_the_boot_module_under_its_own_launcher(tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text("pass")
    env = tmp_path / "env" / "bin"
    env.mkdir(parents=True)
    for name in ("accelerate", "python"):
        (env / name).write_text("#!/bin/sh\n")
        (env / name).chmod(0o755)
    cmd = boot_command(
        [str(env / "accelerate"), "launch", "--mixed_precision", "bf16", str(script), "--lr", "1"],
        tmp_path,
        4,
    )
    # accelerate's options as typed; the interpreter beside the accelerate command
    assert cmd == [
        str(env / "python"),
        "-m",
        "accelerate.commands.launch",
        "--mixed_precision",
        "bf16",
        "-m",
        "stepwise_agent.boot",
        str(tmp_path),
        "4",
        str(script),
        "--lr",
        "1",
    ]
    for bad in (
        [str(env / "accelerate"), "launch", "-m", "pkg.train"],
        [str(env / "accelerate"), "launch"],
    ):
        with pytest.raises(RunError):
            boot_command(bad, tmp_path, 2)
    with pytest.raises(RunError):
        boot_command(
            [str(env / "accelerate"), "launch", str(script)], tmp_path, 2, nproc_per_node=2
        )
