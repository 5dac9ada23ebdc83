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


def test_a_different_cuda_runtime_is_said(tmp_path: Path, capsys) -> None:
    """Kineto writes the runtime as an integer (12040 is 12.4); a trace without it is not called different."""
    a = trace(tmp_path / "a.json", "NVIDIA A100-SXM4-40GB", 8)
    b = trace(tmp_path / "b.json", "NVIDIA A100-SXM4-40GB", 8)
    for path, version in ((a, 12040), (b, 12080)):
        doc = json.loads(path.read_text())
        path.write_text(json.dumps({**doc, "cuda_runtime_version": version}))
    _, out = run(capsys, str(a), str(b), "--json")
    env = json.loads(out)["environment"]
    assert env["differs"] == ["cuda"] and (env["base"]["cuda"], env["new"]["cuda"]) == (
        "12.4",
        "12.8",
    )
    assert (
        env["note"] == "B ran with a different CUDA (12.8 vs 12.4): this compares setups, not code"
    )
    c = trace(tmp_path / "c.json", "NVIDIA A100-SXM4-40GB", 8)  # records none
    _, out = run(capsys, str(a), str(c), "--json")
    assert json.loads(out)["environment"]["same"] is True


def test_the_torch_that_ran_each_script_is_compared(tmp_path: Path, capsys) -> None:
    """A run's torch and the CUDA it was built for come from what its agent recorded (agent.json)."""
    from profilers.store.runs import RunStore
    from tests.app.fake_runs import fake_run

    store = RunStore(tmp_path / "runs")
    runs = []
    for torch_version, cuda in (("2.12.0+cu126", "12.6"), ("2.13.0+cu128", "12.8")):
        facts = {"torch_version": torch_version, "torch_cuda": cuda, "cuda_available": False}
        runs.append(fake_run(store, kind="launch", files={"agent.json": facts}))
    _, out = run(capsys, *(r.run_dir for r in runs), "--json")
    env = json.loads(out)["environment"]
    assert env["base"]["torch"] == "2.12.0+cu126" and env["new"]["torch"] == "2.13.0+cu128"
    assert env["differs"] == ["torch", "cuda"]
    assert env["note"] == (
        "B ran with a different torch (2.13.0+cu128 vs 2.12.0+cu126) and CUDA (12.8 vs 12.6): "
        "this compares setups, not code"
    )


def test_kineto_cuda_versions_read_as_torch_writes_them() -> None:
    from profilers.trace.load import cuda_version

    assert [cuda_version(v) for v in (12040, 11080, 12090, "12.8.93", 0, None, True, "")] == [
        "12.4",
        "11.8",
        "12.9",
        "12.8.93",
        None,
        None,
        None,
        None,
    ]


def test_a_shared_trace_records_its_cuda_runtime(shared_traces: Path) -> None:
    from profilers.trace.load import load_trace

    t = load_trace(shared_traces / "host" / "tracelens_h100_bert-small.json.gz")
    assert t.cuda_runtime == "12.4"  # "cuda_runtime_version": 12040 at its top level


def test_the_exported_comparison_says_the_environment_first(tmp_path: Path, capsys) -> None:
    """The .md, .html and .json a comparison downloads as carry what ``compare --json`` says of the
    environments: the note before the verdict, and the fields."""
    a = trace(tmp_path / "a.json", "Tesla V100-SXM2-16GB", 8)
    b = trace(tmp_path / "b.json", "NVIDIA A100-SXM4-40GB", 8)
    note = "B ran on a different device (NVIDIA A100-SXM4-40GB vs Tesla V100-SXM2-16GB)"
    for suffix in ("md", "html", "json"):
        out = tmp_path / f"c.{suffix}"
        run(capsys, str(a), str(b), "--report", str(out))
        text = out.read_text(encoding="utf-8")
        if suffix == "json":
            env = json.loads(text)["environment"]
            assert env["differs"] == ["device"] and env["note"].startswith(note)
        else:
            assert note in text and text.index(note) < text.index("Verdict"), suffix
