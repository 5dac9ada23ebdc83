"""The agent records how any script is configured, from its objects (``injected.json``'s ``settings``): the
analysis judges a user's script on the same facts as a sample workload."""

from __future__ import annotations

from typing import Any

import torch
import torch.utils.checkpoint
from torch.utils.data import DataLoader, TensorDataset


def _train(
    inj: Any, accum: int = 1, amp: bool = False, ckpt: bool = False, steps: int = 3
) -> dict[str, Any]:
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 2)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, foreach=True)
    loader = DataLoader(TensorDataset(torch.zeros(32, 3, 8, 8)), batch_size=4)
    batches = iter(loader)
    for _ in range(steps):
        for _ in range(accum):
            (x,) = next(batches)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                out = (
                    torch.utils.checkpoint.checkpoint(model, x, use_reentrant=False)
                    if ckpt
                    else model(x)
                )
            out.float().sum().backward()
        opt.step()
        opt.zero_grad()
        inj.on_step()
    return inj.finish()["settings"]


def test_settings_are_read_from_the_scripts_objects(injected: Any) -> None:
    s = _train(injected({}), accum=2, ckpt=True)
    assert (s["num_workers"], s["batch_size"], s["pin_memory"]) == (0, 4, False)
    assert s["grad_accum_steps"] == 2 and s["activation_checkpointing"] is True
    assert s["optimizer_impl"] == "foreach" and s["precision"] == "fp32" and s["compile"] is False
    assert (
        s["channels_last"] is False
        and s["ddp_no_sync"] is False
        and s["grad_compression"] == "none"
    )
    assert s["tf32"] is False and s["cudnn_benchmark"] is False


def test_an_injected_fix_reads_as_the_runs_own_setting(injected: Any) -> None:
    s = _train(injected({"channels_last": True}))
    assert (
        s["channels_last"] is True
        and s["grad_accum_steps"] == 1
        and s["activation_checkpointing"] is False
    )
