"""The WORKLOADS registry: every workload builds, learns-shaped outputs, is deterministic and fits its story.

Per-workload tests run over ``WORKLOADS`` itself, so a new workload is covered as soon as it is registered; what
they need to know about it (the knobs it cannot honour, whether it has convolutions) is read from the table in
``sample_runs/__init__.py``, so a workload missing from those docs fails here instead of being skipped."""

from __future__ import annotations

import io
import re
from typing import get_args

import pytest
import torch
from PIL import Image

import sample_runs
from sample_runs import WORKLOADS, WorkloadError, get_workload, options
from sample_runs.base import Bottleneck
from sample_runs.jpeg_data import encode_images
from sample_runs.train import parse_args
from sample_runs.train_parts import cannot_act, pick_device

REQUIRED = {
    "data_bound",
    "compute_bound",
    "memory_bound",
    "communication_bound",
    "resnet_small",
    "gpt_small",
    "digits",
}
ALL = sorted(WORKLOADS)


def test_registry_holds_the_required_workloads_and_names_them_on_a_miss() -> None:
    assert REQUIRED <= set(WORKLOADS)
    assert get_workload("digits") is WORKLOADS["digits"]
    with pytest.raises(
        WorkloadError, match="unknown workload 'nope'; known workloads: .*data_bound"
    ):
        get_workload("nope")
    with pytest.raises(WorkloadError, match="cannot load workload"):
        get_workload("no.such.module:W")
    with pytest.raises(WorkloadError, match="not a sample_runs.Workload"):
        get_workload("sample_runs:WORKLOADS")
    assert get_workload("sample_runs.digits:WORKLOAD") is WORKLOADS["digits"]


@pytest.mark.parametrize("name", ALL)
def test_each_workload_builds_a_model_that_trains_on_its_data(name: str) -> None:
    w = WORKLOADS[name]
    assert {"tiny", "bench"} <= set(w.sizes) and w.description
    assert options.check(options.defaults(name, "tiny")) is None
    assert options.check(options.defaults(name, "bench")) is None  # valid too
    torch.manual_seed(0)
    parts = w.build("tiny")
    n = min(8, len(parts.dataset))  # type: ignore[arg-type]
    samples = [parts.dataset[i] for i in range(n)]
    x = torch.stack([torch.as_tensor(s[0]) for s in samples])
    y = torch.stack([torch.as_tensor(s[1]) for s in samples])
    loss = parts.loss_fn(parts.model(x), y)
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    assert all(p.grad is not None for p in parts.model.parameters())
    for block in parts.checkpoint_blocks:
        parts.model.get_submodule(block)  # every declared block exists


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "data_bound" else n for n in ALL]
)
def test_data_is_deterministic_from_the_seed(
    name: str,
) -> None:  # data_bound encodes its JPEGs three times: 1.7 s
    w = WORKLOADS[name]
    first = w.build("tiny").dataset[3]
    again = w.build("tiny").dataset[3]
    other = w.build("tiny", seed=1).dataset[3]
    assert torch.equal(torch.as_tensor(first[0]), torch.as_tensor(again[0]))
    assert not torch.equal(torch.as_tensor(first[0]), torch.as_tensor(other[0]))


def test_the_designed_workloads_carry_their_bottleneck() -> None:
    assert {
        n: WORKLOADS[n].intended_bottleneck
        for n in ("data_bound", "compute_bound", "memory_bound", "communication_bound")
    } == {
        "data_bound": "data",
        "compute_bound": "compute",
        "memory_bound": "memory",
        "communication_bound": "communication",
    }


@pytest.mark.parametrize("name", ALL)
def test_a_designed_bottleneck_is_built_into_every_baseline(name: str) -> None:
    """A workload built to be ``memory``-bound has a memory budget, ``communication``-bound runs two ranks,
    ``data``-bound decodes each sample; one with no designed bottleneck (``None``) is realistic, and the real-run
    tests expect its trace to show what ``tests/sample_runs/dominant.py`` says."""
    from tests.sample_runs.dominant import GROUPS, expected_group

    w = WORKLOADS[name]
    assert w.intended_bottleneck in (None, *get_args(Bottleneck)), w.intended_bottleneck
    for size in ("tiny", "bench"):
        settings = options.defaults(name, size)
        if w.intended_bottleneck == "memory":
            assert settings["memory_budget_mb"] is not None
        if w.intended_bottleneck == "communication":
            assert settings["world_size"] >= 2
    if w.intended_bottleneck == "data":
        assert w.build("tiny").decodes_samples
    if w.intended_bottleneck is None:
        assert expected_group(name) in GROUPS


def test_settings_and_params_resolution() -> None:
    w = WORKLOADS["compute_bound"]
    assert w.settings("tiny")["batch_size"] == 128 and w.settings("bench")["batch_size"] == 256
    assert (
        w.resolve_params("tiny", {"width": 32})["width"] == 32
        and w.resolve_params("tiny")["depth"] == 3
    )
    with pytest.raises(WorkloadError, match="has no parameter"):
        w.build("tiny", {"widht": 3})
    with pytest.raises(WorkloadError, match="has no size 'huge'"):
        w.settings("huge")
    with pytest.raises(WorkloadError, match="has no size"):
        w.build("huge")


def test_data_bound_really_decodes_jpeg_per_sample() -> None:
    blobs, labels = encode_images(3, classes=10, size=48, seed=0)
    assert (
        all(b[:2] == b"\xff\xd8" for b in blobs) and len(labels) == 3
    )  # JPEG start-of-image marker
    assert Image.open(io.BytesIO(blobs[0])).format == "JPEG"
    ds = WORKLOADS["data_bound"].build("tiny").dataset
    x, label = ds[0]
    assert x.shape == (3, 64, 64) and x.dtype == torch.float32 and 0 <= label < 10
    assert torch.equal(ds[0][0], x)  # augmentation seeded per sample: the same wherever computed


def test_digits_is_the_real_sklearn_data() -> None:
    ds = WORKLOADS["digits"].build("bench").dataset
    assert len(ds) == 1797  # type: ignore[arg-type]
    x, y = ds[0]
    assert (
        x.shape == (1, 8, 8)
        and 0.0 <= float(x.min())
        and float(x.max()) <= 1.0
        and 0 <= int(y) <= 9
    )


# The knobs whose "cannot act" depends on the workload (ddp and CUDA knobs are the same everywhere).
PER_WORKLOAD_KNOBS = {"channels_last", "cache_decoded", "activation_checkpointing"}


def documented_cannot_act(doc: str) -> dict[str, set[str]]:
    """``{workload: knobs}`` from the reST table in ``sample_runs``'s docstring (a row may name several
    workloads, ``a, b``, and run on over indented lines), limited to :data:`PER_WORKLOAD_KNOBS`."""
    table = re.search(r"^=+ +=+\n.*?\n=+ +=+\n(.*?)\n=+ +=+$", doc, re.S | re.M)
    assert table, "no workload table in sample_runs' docstring"
    rows: dict[str, set[str]] = {}
    names: list[str] = []
    for line in table.group(1).splitlines():
        if not line[:1].isspace():  # a new row: the workload names, then the knobs
            first, _, line = line.partition("  ")
            names = [n.strip() for n in first.split(",")]
            rows.update({n: set() for n in names})
        for n in names:
            rows[n] |= set(re.findall(r"``(\w+)``", line)) & PER_WORKLOAD_KNOBS
    return rows


def documented_without_convolutions(doc: str) -> set[str]:
    found = re.search(r"without convolutions \(([^)]*)\)", " ".join(doc.split()))
    assert found, "sample_runs' docstring no longer lists the workloads without convolutions"
    return {n.strip() for n in found.group(1).split(",")}


CANNOT_ACT = documented_cannot_act(sample_runs.__doc__ or "")
NO_CONVOLUTIONS = documented_without_convolutions(sample_runs.__doc__ or "")


def test_the_docs_table_names_every_workload_and_only_those() -> None:
    assert set(CANNOT_ACT) == set(WORKLOADS)
    assert NO_CONVOLUTIONS <= set(WORKLOADS)
    # The table as it reads today, so a parsing slip cannot make the two tests below vacuous.
    assert CANNOT_ACT["data_bound"] == set() and CANNOT_ACT["digits"] == {"cache_decoded"}
    assert CANNOT_ACT["gpt_small"] == {"channels_last", "cache_decoded"}


@pytest.mark.parametrize("name", ALL)
def test_the_knobs_a_workload_cannot_honour_are_warned_as_documented(name: str) -> None:
    args = parse_args(
        [
            name,
            "--device",
            "cpu",
            "--channels-last",
            "--cache-decoded",
            "--activation-checkpointing",
        ]
    )
    notes = " | ".join(
        cannot_act(args, WORKLOADS[name].build("tiny"), pick_device("cpu", 0), 1, None)
    )
    warned = {k for k in sorted(PER_WORKLOAD_KNOBS) if f"{k}=True" in notes}
    assert name in CANNOT_ACT, (
        f"{name} is missing from the workload table in sample_runs/__init__.py"
    )
    assert warned == CANNOT_ACT[name], notes


@pytest.mark.parametrize("name", ALL)
def test_cudnn_benchmark_on_cuda_is_warned_where_there_is_no_convolution(name: str) -> None:
    on = parse_args([name, "--cudnn-benchmark"])
    parts = WORKLOADS[name].build("tiny")
    cuda = torch.device("cuda", 0)  # only its type is read
    notes = [n for n in cannot_act(on, parts, cuda, 1, None) if "cudnn_benchmark" in n]
    assert bool(notes) == (name in NO_CONVOLUTIONS), notes
    assert not [n for n in cannot_act(parse_args([name]), parts, cuda, 1, None) if "cudnn" in n]
    cpu = [n for n in cannot_act(on, parts, torch.device("cpu"), 1, None) if "cudnn_benchmark" in n]
    assert cpu == [
        "cudnn_benchmark=True has no effect on cpu (CUDA only); ignored"
    ]  # the CPU says "CUDA only"
