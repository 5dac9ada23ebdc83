"""``compare`` says first what differs between the two inputs' environments: a verdict between two
devices compares machines, not code."""

from __future__ import annotations

import json
from pathlib import Path

from cli.advisors import main
from tests.trace_factory import kernel, step, write, x


def trace(path: Path, device: str, world_size: int, gemm_us: float = 800.0) -> Path:
    evs: list[dict] = []
    for s in range(8):
        t0 = s * 1000.0
        evs += [
            step(s + 1, t0, 1000),
            x("aten::mm", t0 + 1, 5, correlation=s),
            kernel("ampere_sgemm_128x64_tn", t0 + 10, gemm_us, correlation=s),
        ]
    props = [{"id": 0, "name": device, "totalGlobalMem": 16 * 2**30}]
    info = {"backend": "nccl", "rank": 0, "world_size": world_size}
    return write(path, evs, deviceProperties=props, distributedInfo=info)


def run(capsys, *args: str) -> tuple[int, str]:
    code = main(["compare", *args])
    return code, capsys.readouterr().out


def test_different_devices_and_world_sizes_are_said_first(tmp_path: Path, capsys) -> None:
    a = trace(tmp_path / "a.json", "Tesla V100-SXM2-16GB", 8)
    b = trace(tmp_path / "b.json", "NVIDIA A100-SXM4-40GB", 16)
    _, out = run(capsys, str(a), str(b), "--json")
    doc = json.loads(out)
    env = doc["environment"]
    assert env["same"] is False and env["differs"] == ["device", "world_size"]
    assert env["base"]["device"] == "Tesla V100-SXM2-16GB" and env["new"]["world_size"] == 16
    assert env["note"] == (
        "B ran on a different device (NVIDIA A100-SXM4-40GB vs "
        "Tesla V100-SXM2-16GB) and world size (16 vs 8): this compares "
        "machines, not code"
    )
    assert "verdict" in doc and "movers" in doc  # the existing fields stay
    _, text = run(capsys, str(a), str(b))
    first = text.splitlines()[0]
    assert first.startswith("environment: B ran on a different device") and "machines" in first


def test_same_environment_says_nothing(tmp_path: Path, capsys) -> None:
    a = trace(tmp_path / "a.json", "NVIDIA A100-SXM4-40GB", 8)
    b = trace(tmp_path / "b.json", "NVIDIA A100-SXM4-40GB", 8, gemm_us=700)
    _, out = run(capsys, str(a), str(b), "--json")
    env = json.loads(out)["environment"]
    assert env["same"] is True and env["differs"] == [] and env["note"] is None
    _, text = run(capsys, str(a), str(b))
    assert not text.startswith("environment:")


def test_only_a_world_size_is_a_setup_not_a_machine(tmp_path: Path, capsys) -> None:
    a = trace(tmp_path / "a.json", "NVIDIA A100-SXM4-40GB", 8)
    b = trace(tmp_path / "b.json", "NVIDIA A100-SXM4-40GB", 4)
    _, out = run(capsys, str(a), str(b), "--json")
    note = json.loads(out)["environment"]["note"]
    assert note == "B ran with a different world size (4 vs 8): this compares setups, not code"
