"""A model behind a wrapper that passes attribute sets on to the module it wraps (Lightning Fabric's
``_FabricModule``): the injected autocast must wrap the wrapper alone. Issue 42: bf16 on a Fabric script failed
at step 0 with a RecursionError, the wrapper's forward and the wrapped module's calling each other."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class PassingWrapper(nn.Module):
    """Like ``_FabricModule``: its ``forward`` calls the wrapped module; setting an attribute the wrapped module
    also has sets it there too."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self._forward_module = module
        self._ready = True

    @property
    def module(self) -> nn.Module:
        return self._forward_module

    def forward(self, *args: Any) -> Any:
        return self._forward_module(*args)

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_ready", False) and hasattr(self._forward_module, name):
            setattr(self._forward_module, name, value)
        super().__setattr__(name, value)


def test_autocast_wraps_the_wrapper_alone(injected: Any) -> None:
    inj = injected({"autocast": "bf16"})
    model = PassingWrapper(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)))
    x, y = torch.randn(8, 8), torch.randint(0, 3, (8,))
    for _ in range(2):
        loss = nn.functional.cross_entropy(model(x), y)  # RecursionError before the fix
        loss.backward()
        inj.on_step()
    assert "forward" not in model.module.__dict__  # the wrapped module's own forward is untouched
    k = inj.finish()["knobs"]["autocast"]
    assert k["acted"] and "ran in bf16" in k["evidence"][0]
