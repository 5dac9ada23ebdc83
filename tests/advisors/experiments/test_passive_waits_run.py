"""``optimize --check --fix omp_passive_waits -- python train.py`` for real (slow): the patched run's
process starts with ``OMP_WAIT_POLICY=PASSIVE``, the baseline's with the user's environment as it is
(no policy), the knob says it acted, and the change shown is the user's command with the variable in
front. Nothing here rests on speed (a check asks for no verdict)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = """
import os
import torch
print("policy:", os.environ.get("OMP_WAIT_POLICY"), flush=True)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(400):
    x = torch.randn(64, 256)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_the_patched_arm_alone_starts_with_passive_waits(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}  # as a user has it
    cmd = [
        sys.executable,
        "-m",
        "advisors",
        "optimize",
        "--json",
        "--check",
        "--rounds",
        "1",
        "--steps",
        "4",
        "--warmup",
        "1",
        "--fix",
        "omp_passive_waits",
        "--store",
        str(tmp_path / "runs"),
        "--",
        "python",
        "train.py",
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (r,) = json.loads(proc.stdout)["rounds"]
    knob = r["applied"]["knobs"]["env:OMP_WAIT_POLICY"]
    assert knob["acted"] and "OMP_WAIT_POLICY=PASSIVE" in knob["evidence"][0], knob
    assert r["change"]["kind"] == "command"
    assert "+ OMP_WAIT_POLICY=PASSIVE python train.py" in r["change"]["text"], r["change"]
    printed = {
        role: (Path(d) / "stdout.log").read_text()
        for role, d in (
            ("before", r["before"]["run_dirs"][0]),
            ("after", r["after"]["run_dirs"][0]),
        )
    }
    assert "policy: None" in printed["before"] and "policy: PASSIVE" in printed["after"], printed
