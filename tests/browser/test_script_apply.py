"""In a real browser, with real runs: a tiny data-bound script (written here) launched unmodified through
``python -m profilers launch``, its Advisor page, Apply with 2 runs per arm — the DataLoader fix is injected at
boot, measured, and the verdict comes with the diff of the script's DataLoader line. Slow (real runs on a CPU)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.browser.harness import REPO, wait_for_app

pytestmark = [pytest.mark.slow, pytest.mark.timed]

EXPERIMENT_TIMEOUT_MS = 900_000

#: Each sample waits on "storage" (sleep): the loader on the main thread is the step; worker processes hide it.
#: The samples are fixed tensors (the same batches in every arm, whatever process reads them): the loss holds.
SCRIPT = textwrap.dedent("""
    import time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __init__(self):
            self.x = torch.randn(4096, 32)
            self.y = (self.x[:, :4].argmax(1))
        def __len__(self): return len(self.x)
        def __getitem__(self, i):
            time.sleep(0.004)
            return self.x[i], self.y[i]

    loader = DataLoader(Slow(), batch_size=16, shuffle=True)
    model = torch.nn.Linear(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(1000):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
""")


def test_apply_on_a_launched_script_shows_the_diff(server, watch, tmp_path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "STEPWISE_HOME": str(server.home), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "profilers", "launch", "--steps", "3", "--", "python", "train.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    page = watch.page
    page.goto(f"{server.url}/advisor")
    page.get_by_role("heading", name="Advisor").wait_for()
    page.get_by_text("Apply the fix").wait_for()
    page.get_by_text("injected at boot", exact=False).first.wait_for()
    wait_for_app(page)
    watch.shot("script_advisor")
    for label, value in (("Runs per arm", "2"), ("Timed steps per run", "6")):
        page.get_by_label(label).fill(value)
        page.get_by_label(label).press("Enter")
        wait_for_app(page)
    page.get_by_role("button", name="Apply").click()
    page.get_by_text("baseline run 1 of 2", exact=False).wait_for()
    page.get_by_text("Step time before and after", exact=False).wait_for(
        timeout=EXPERIMENT_TIMEOUT_MS
    )
    page.get_by_text(
        "Outcome: kept", exact=False
    ).first.wait_for()  # the one outcome word (reports.outcomes)
    line = SCRIPT.splitlines().index("loader = DataLoader(Slow(), batch_size=16, shuffle=True)") + 1
    page.get_by_text(f"train.py:{line}", exact=False).first.wait_for()
    diff = page.locator("[data-testid='stCode']").filter(
        has_text="+loader = DataLoader(Slow(), batch_size=16, shuffle=True, num_workers="
    )
    diff.first.scroll_into_view_if_needed()
    watch.shot("script_apply_diff")
    assert diff.count() == 1
    assert script.read_text() == SCRIPT  # the user's file is never written
    assert not watch.page_errors and not watch.dialogs
