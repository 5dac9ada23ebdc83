"""The line that ran to build and move each model (``model_build``): the branch the run took, the user's own
``.to(device)``, the inner model of a wrapper — recorded by the agent while the script sets up."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

from torch import nn

from stepwise_agent.inject.built import BuildSites

SCRIPT = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 2))
        self.to("cpu")  # the module moving itself, inside its own construction: not the user's move

    def forward(self, x):
        return self.body(x)


class Wrapper(nn.Module):  # holds the trained model as .module, as DistributedDataParallel does
    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        return self.module(x)


def main(inj, kind, wrap):
    if kind == "wide":
        model = Net(64)
    elif kind == "narrow":
        model = Net(8)
    model = model.to("cpu")
    if wrap:
        model = Wrapper(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(torch.randn(8, 4)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        inj.on_step()
"""


def _line(text: str) -> int:
    return next(i for i, x in enumerate(SCRIPT.splitlines(), 1) if x.strip() == text)


def _run(tmp_path: Path, injected: Any, kind: str, wrap: bool = False) -> dict[str, Any]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    inj = injected({})
    runpy.run_path(str(script))["main"](inj, kind, wrap)
    return inj.finish()


def test_the_site_is_the_branch_that_ran_and_the_users_own_move(
    tmp_path: Path, injected: Any
) -> None:
    report = _run(tmp_path, injected, "narrow")
    site = report["sites"]["model_build"]
    assert site["file"] == str(tmp_path / "train.py") and site["type"] == "Net"
    assert site["line"] == _line(
        'model = model.to("cpu")'
    )  # moved after it was built: complete there
    assert site["built"]["line"] == _line(
        "model = Net(8)"
    )  # the branch taken, not "wide"'s Net(64)
    assert site["built"]["code"] == "model = Net(8)"
    assert (
        len(report["all_sites"]["model_build"]) == 1
    )  # one model: its submodules are no build sites


def test_a_wrapped_model_is_sited_where_its_inner_model_was_built(
    tmp_path: Path, injected: Any
) -> None:
    site = _run(tmp_path, injected, "wide", wrap=True)["sites"]["model_build"]
    assert site["type"] == "Net" and site["line"] == _line('model = model.to("cpu")')
    assert site["built"]["line"] == _line("model = Net(64)")


def test_no_move_reads_as_the_construction_and_uninstall_restores_torch(tmp_path: Path) -> None:
    original = (nn.Module.__init__, nn.Module.to, nn.Module.cuda)
    sites = BuildSites()
    sites.install()
    try:
        scope: dict[str, Any] = {"nn": nn}
        script = tmp_path / "build.py"
        script.write_text("layer = nn.Linear(2, 2)\nbare = nn.Module()\n")
        exec(compile(script.read_text(), str(script), "exec"), scope)
    finally:
        sites.uninstall()
    assert (nn.Module.__init__, nn.Module.to, nn.Module.cuda) == original
    built = sites.site_of(scope["layer"])
    assert built == {"file": str(script), "line": 1, "code": "layer = nn.Linear(2, 2)"}
    assert sites.site_of(scope["bare"])["line"] == 2  # type: ignore[index]
    assert sites.site_of(nn.Linear(2, 2)) is None  # built after uninstall: nothing noted


class _HashesByState(nn.Module):
    """As a torchmetrics ``Metric``: its hash reads state its own ``__init__`` sets after ``nn.Module``'s."""

    def __init__(self) -> None:
        super().__init__()
        self._defaults: dict[str, int] = {"n": 0}

    def __hash__(self) -> int:
        return hash(tuple(self._defaults))


def test_a_module_that_hashes_by_its_own_state_builds_and_is_noted() -> None:
    sites = BuildSites()
    sites.install()
    try:
        metric = _HashesByState()  # noted while its __init__ still ran, before _defaults existed
    finally:
        sites.uninstall()
    assert metric._defaults == {"n": 0}
    assert sites.site_of(metric) is not None  # this file is the user's: the line above was noted
