"""The workers fix lands on the training loader: a loader a library rebuilds from the user's (accelerate's
``prepare``) is changed at the user's ``DataLoader(...)`` holding the same dataset — not at the last one the
script built (issue 42: run_clm_no_trainer's eval loader at line 503 got ``num_workers=4``, its train loader at
500 was the one training)."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from stepwise_agent.inject import sites

LIBRARY = '''
from torch.utils.data import DataLoader


def prepare(*loaders):
    """Like accelerate's prepare(): every loader rebuilt from its dataset."""
    return [DataLoader(dl.dataset, batch_size=dl.batch_size, num_workers=dl.num_workers) for dl in loaders]
'''


@pytest.fixture
def fakelib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """An installed library (its folder counts as site-packages for the agent) that rebuilds loaders."""
    root = tmp_path / "site-packages"
    (root / "fakelib").mkdir(parents=True)
    (root / "fakelib" / "__init__.py").write_text(LIBRARY)
    lib = os.path.realpath(root) + os.sep
    monkeypatch.setattr(sites, "_LIBRARIES", (*sites._LIBRARIES, lib))
    monkeypatch.setattr(sites, "_SKIP_DIRS", (*sites._SKIP_DIRS, lib))
    monkeypatch.syspath_prepend(str(root))
    yield importlib.import_module("fakelib")
    sys.modules.pop("fakelib", None)


def test_a_rebuilt_training_loader_is_changed_where_the_user_built_it(
    injected: Any, fakelib: Any
) -> None:
    inj = injected({"num_workers": 0})
    train_data = TensorDataset(torch.randn(32, 4), torch.zeros(32))
    eval_data = TensorDataset(torch.randn(16, 4), torch.zeros(16))
    train = DataLoader(train_data, batch_size=8)  # the training loader, built first
    here = sys._getframe().f_lineno - 1
    evaluation = DataLoader(eval_data, batch_size=8)  # then the evaluation loader
    train, evaluation = fakelib.prepare(train, evaluation)
    next(iter(train))  # the training loop draws from the rebuilt training loader
    site = inj.report.sites["dataloader"]
    assert site["line"] == here and site["file"] == os.path.abspath(__file__), site
