"""Fix injection, in-process: each knob changes the script's own object, and the report says whether it acted
and why not — checked on real torch objects built the way a script builds them."""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from stepwise_agent.inject import Injector
from stepwise_agent.inject.loader import CachedDataset, cache_refusal, same_sample
from profilers.run.script_spec import ScriptSpec
from profilers.errors import SpecError


ORIGINAL_CALL = nn.Module.__call__


class Deterministic(Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.full((4,), float(i)), i % 3


class RandomCrop(Deterministic):
    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        start = random.randint(0, 4)
        return torch.arange(8.0)[start : start + 4] + i, i % 3


def _train(
    model: nn.Module, loader: Any, opt: torch.optim.Optimizer, inj: Injector, steps: int = 3
) -> list[float]:
    losses = []
    for i, (x, y) in enumerate(loader):
        if i >= steps:
            break
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        inj.on_step()
        losses.append(float(loss.detach()))
    return losses


def test_nothing_to_inject_still_records_the_users_call_sites(injected: Any) -> None:
    inj = injected({})
    loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 3, (32,))), batch_size=8)
    model = nn.Linear(8, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    _train(model, loader, opt, inj)
    report = inj.finish()
    assert report["knobs"] == {}
    sites = report["sites"]
    assert set(sites) == {"dataloader", "optimizer", "model_call", "model_build"}
    assert all(s["file"] == __file__ for s in sites.values())
    assert (
        sites["model_build"]["code"] == "model = nn.Linear(8, 3)"
        and "built" not in sites["model_build"]
    )
    assert "DataLoader(" in sites["dataloader"]["code"] and sites["dataloader"]["num_workers"] == 0
    assert "SGD(" in sites["optimizer"]["code"] and sites["model_call"]["type"] == "Linear"
    assert "model(x)" in sites["model_call"]["code"]
    assert report["loader"]["batch_size"] == 8


def test_dataloader_keywords_are_overridden_and_workers_proven(injected: Any) -> None:
    inj = injected(
        {"num_workers": 2, "persistent_workers": True, "prefetch_factor": 3, "pin_memory": True}
    )
    loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 3, (32,))), batch_size=8)
    assert loader.num_workers == 2 and loader.persistent_workers and loader.prefetch_factor == 3
    model = nn.Linear(8, 3)
    _train(model, loader, torch.optim.SGD(model.parameters(), lr=0.1), inj)
    knobs = inj.finish()["knobs"]
    assert (
        knobs["num_workers"]["acted"]
        and "2 worker processes" in knobs["num_workers"]["evidence"][0]
    )
    assert knobs["prefetch_factor"]["acted"] and knobs["persistent_workers"]["acted"]
    # no accelerator here: pinning cannot act, and the report says so instead of claiming it
    assert not torch.cuda.is_available()
    assert knobs["pin_memory"]["acted"] is False and "no accelerator" in knobs["pin_memory"]["why"]
    assert (
        inj.finish()["sites"]["dataloader"]["num_workers"] == 0
    )  # what the script itself asked for


def test_worker_only_knobs_are_refused_without_workers(injected: Any) -> None:
    inj = injected({"prefetch_factor": 4})
    loader = DataLoader(TensorDataset(torch.randn(16, 8), torch.randint(0, 3, (16,))), batch_size=8)
    assert (
        loader.prefetch_factor is None
    )  # DataLoader itself would raise on prefetch_factor with no workers
    model = nn.Linear(8, 3)
    _train(model, loader, torch.optim.SGD(model.parameters(), lr=0.1), inj)
    k = inj.finish()["knobs"]["prefetch_factor"]
    assert k["acted"] is False and "num_workers=0" in k["why"]


def test_cache_is_refused_for_random_augmentation_and_keeps_the_rng_streams() -> None:
    torch.manual_seed(3)
    random.seed(3)
    before = (random.random(), torch.rand(1).item())
    torch.manual_seed(3)
    random.seed(3)
    why = cache_refusal(RandomCrop(), available_bytes=2**34)
    assert why is not None and "different samples" in why
    assert (
        random.random(),
        torch.rand(1).item(),
    ) == before  # probing did not move the script's streams
    assert cache_refusal(Deterministic(), available_bytes=2**34) is None
    assert "GiB" in (cache_refusal(Deterministic(), available_bytes=1000) or "")


def test_cache_serves_repeated_reads_and_counts_hits(injected: Any) -> None:
    inj = injected({"cache_decoded": True})
    loader = DataLoader(Deterministic(), batch_size=16, shuffle=True)
    assert isinstance(loader.dataset, CachedDataset)
    assert loader.dataset.__len__() == 64 and loader.dataset.ds.__class__ is Deterministic
    for _ in range(2):  # two epochs: the second reads every sample from the cache
        for _batch in loader:
            pass
    k = inj.finish()["knobs"]["cache_decoded"]
    assert k["acted"] and "64 of 128 sample reads came from the cache" in k["evidence"][0]


def test_cache_refusal_is_reported(injected: Any) -> None:
    inj = injected({"cache_decoded": True})
    loader = DataLoader(RandomCrop(), batch_size=16)
    assert not isinstance(loader.dataset, CachedDataset)
    k = inj.finish()["knobs"]["cache_decoded"]
    assert k["acted"] is False and "random augmentation" in k["why"]


def test_bf16_autocast_wraps_the_outermost_model_and_returns_fp32(injected: Any) -> None:
    inj = injected({"autocast": "bf16"})
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    loss_fn = nn.CrossEntropyLoss()  # a module without parameters is not "the model"
    x, y = torch.randn(8, 8), torch.randint(0, 3, (8,))
    out = model(x)
    assert out.dtype == torch.float32  # the script's loss is computed in fp32 as before
    loss = loss_fn(out, y)
    loss.backward()
    inj.on_step()
    assert (
        nn.Module.__call__ is not ORIGINAL_CALL
    )  # a GAN's second model is called after its first step ends
    inj.on_step()
    assert inj.modules.models == [model]
    k = inj.finish()["knobs"]["autocast"]
    assert k["acted"] and "ran in bf16" in k["evidence"][0]
    assert nn.Module.__call__ is ORIGINAL_CALL  # the class-wide watch ended with the second step


def test_autocast_that_lowers_nothing_is_not_applied(injected: Any) -> None:
    class Pointwise(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.ones(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * self.scale).sum(dim=1, keepdim=True).expand(-1, 3)

    inj = injected({"autocast": "bf16"})
    m = Pointwise()
    m(torch.randn(2, 4)).sum().backward()
    inj.on_step()
    k = inj.finish()["knobs"]["autocast"]
    assert k["acted"] is False and "still produced" in k["why"]


def test_fp16_autocast_scales_the_loss_through_a_gradscaler(injected: Any) -> None:
    inj = injected(
        {"autocast": "fp16"}
    )  # fp16 is a CUDA fix; the scaler path itself runs on the CPU too
    model = nn.Linear(8, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w0 = model.weight.detach().clone()
    loss = nn.functional.cross_entropy(model(torch.randn(8, 8)), torch.randint(0, 3, (8,)))
    loss.backward()
    scaler = inj.modules.scaler
    assert scaler is not None and inj.optim.scaler is scaler
    opt.step()
    assert (
        not torch.equal(model.weight, w0) or scaler.get_scale() < 65536.0
    )  # stepped, or skipped and rescaled
    assert inj.finish()["knobs"]["autocast"]["acted"]


def test_optimizer_foreach_and_missing_fused_implementation(injected: Any) -> None:
    inj = injected({"optimizer_impl": "foreach"})
    model = nn.Linear(8, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    assert opt.defaults["foreach"] is True
    evidence = inj.finish()["knobs"]["optimizer_impl"]
    assert evidence["acted"]
    # AdamW's constructor runs Adam's: one optimizer, counted once, by its own class
    assert [e for e in evidence["evidence"] if "optimizer(s)" in e] == [
        "1 optimizer(s) built with foreach=True: AdamW"
    ], evidence["evidence"]
    inj.uninstall()
    inj2 = injected({"optimizer_impl": "fused"})
    torch.optim.RMSprop(nn.Linear(2, 2).parameters())
    k = inj2.finish()["knobs"]["optimizer_impl"]
    assert (
        k["acted"] is False
        and "has no fused= for RMSprop" in k["why"]
        and k["why"].startswith("not applied: torch ")
    )


def test_channels_last_needs_convolutions(injected: Any) -> None:
    inj = injected({"channels_last": True})
    conv = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten())
    out = conv(torch.randn(2, 3, 8, 8))
    out.sum().backward()
    assert conv[0].weight.is_contiguous(memory_format=torch.channels_last)
    assert inj.finish()["knobs"]["channels_last"]["acted"]
    inj.uninstall()
    inj2 = injected({"channels_last": True})
    nn.Linear(4, 4)(torch.randn(2, 4)).sum().backward()
    k = inj2.finish()["knobs"]["channels_last"]
    assert k["acted"] is False and "no 4-D" in k["why"]


def test_cuda_only_knobs_say_why_on_the_cpu(injected: Any) -> None:
    inj = injected(
        {
            "matmul_precision": "high",
            "cudnn_benchmark": True,
            "alloc_conf": "expandable_segments:True",
        }
    )
    nn.Conv2d(3, 3, 3)(torch.randn(1, 3, 5, 5)).sum().backward()
    knobs = inj.finish()["knobs"]
    assert "CPU" in knobs["matmul_precision"]["why"] and "CPU" in knobs["cudnn_benchmark"]["why"]
    assert knobs["alloc_conf"]["acted"] is False
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.benchmark = False


def test_uninstall_restores_torch() -> None:
    before = (
        DataLoader.__init__,
        DataLoader._get_iterator,
        nn.Module.__call__,
        torch.optim.Optimizer.__init__,
        torch.optim.SGD.__init__,
        torch.Tensor.backward,
    )
    inj = Injector({"optimizer_impl": "foreach", "autocast": "fp16", "num_workers": 1})
    inj.install()
    inj.uninstall()
    after = (
        DataLoader.__init__,
        DataLoader._get_iterator,
        nn.Module.__call__,
        torch.optim.Optimizer.__init__,
        torch.optim.SGD.__init__,
        torch.Tensor.backward,
    )
    assert before == after


def test_same_sample_compares_structures() -> None:
    assert same_sample((torch.ones(2), {"a": 1}), (torch.ones(2), {"a": 1}))
    assert not same_sample((torch.ones(2), 1), (torch.zeros(2), 1))
    assert not same_sample(torch.ones(2), torch.ones(3))


def test_script_spec_validates_and_patches_knobs(tmp_path: Any) -> None:
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    spec = ScriptSpec(command=("python", "train.py", "--lr", "1"), cwd=str(tmp_path))
    assert spec.name == "train.py" and spec.workload == "script:train.py" and spec.world_size == 1
    b = spec.patch(inject={"num_workers": 4})
    assert spec.describe_diff(b) == {"num_workers": (None, 4)}
    assert b.patch(inject={"num_workers": None}).inject == {}
    assert ScriptSpec.from_dict(b.to_dict()) == b
    with pytest.raises(SpecError, match="unknown injection knob"):
        ScriptSpec(command=("python", "train.py"), inject={"warp_drive": True})
    with pytest.raises(SpecError, match="takes int"):
        ScriptSpec(command=("python", "train.py"), inject={"num_workers": True})
    with pytest.raises(SpecError, match="rdzv_endpoint"):
        ScriptSpec(command=("python", "train.py"), nnodes=2)
