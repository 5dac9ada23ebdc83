"""A launched script sees the environment it sees run bare: Stepwise sets nothing that changes its speed, and the
variables the agent needs to start (``PYTHONPATH``, ``PYTHONUNBUFFERED``) are the user's again before it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profilers.run.agent_env import RESTORED, RUN_ID_ENV, agent_settings, child_environment
from profilers.run.launch import launch
from profilers.run.records import RunStatus
from profilers.store.runs import RunStore
from stepwise_agent.user_env import ENV, restore

# Prints what decides its speed: the thread and runtime variables, the whole environment, torch's thread counts;
# its own DataLoader worker (fork) and a child process it starts report theirs too.
PRINTS_ITS_ENVIRONMENT = textwrap.dedent("""
    import json, os, subprocess, sys, torch
    from torch.utils.data import DataLoader, Dataset

    class Env(Dataset):
        def __len__(self): return 64
        def __getitem__(self, i):
            return torch.tensor([len(os.environ.get("PYTHONPATH", "")), len(os.environ)], dtype=torch.float32)

    seen = {"env": dict(os.environ), "threads": torch.get_num_threads(),
            "interop": torch.get_num_interop_threads(),
            "child": json.loads(subprocess.run([sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
                                               capture_output=True, text=True, check=True).stdout)}
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i, xb in enumerate(DataLoader(Env(), batch_size=8, num_workers=1)):
        seen.setdefault("worker", xb[0].tolist())
        loss = model(xb).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if i == 0:
            with open(sys.argv[1], "w") as fh:
                json.dump(seen, fh)
""")
OURS = ("STEPWISE_", "_")  # the run's own marks (RUN_ID_ENV) and the shell's "_"


def _theirs(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith(OURS[0]) and k != OURS[1]}


def test_restore_puts_back_the_users_values_and_drops_its_own_variable() -> None:
    env = child_environment(
        {"PYTHONPATH": "/theirs", "OMP_NUM_THREADS": "3"},
        {"PYTHONPATH": "/agent:/theirs"},
        "run-1",
        agent=True,
    )
    assert env["PYTHONPATH"] == "/agent:/theirs" and env["PYTHONUNBUFFERED"] == "1"
    assert (
        env["OMP_NUM_THREADS"] == "3"
        and "OMP_WAIT_POLICY" not in env
        and env[RUN_ID_ENV] == "run-1"
    )
    restored = restore(env)
    assert restored == {"PYTHONPATH": "/theirs", "PYTHONUNBUFFERED": None}
    assert env == {"PYTHONPATH": "/theirs", "OMP_NUM_THREADS": "3", RUN_ID_ENV: "run-1"}
    assert restore(env) == {}  # nothing left to restore: a second call changes nothing


def test_agent_settings_list_every_variable_stepwise_set_and_what_the_script_sees() -> None:
    env = child_environment({}, {"PYTHONPATH": "/agent"}, "run-2", agent=True)
    rows = {row["name"]: row for row in agent_settings(env)}
    assert set(rows) == {*RESTORED, RUN_ID_ENV, ENV}
    assert all(row["why"] and row["changes_speed"] is False for row in rows.values())
    assert rows["PYTHONPATH"]["script_sees"].startswith("yours")
    assert not any(name.startswith(("OMP_", "MKL_", "KMP_", "PYTORCH_")) for name in rows)


def test_a_fix_under_test_is_the_only_speed_setting_and_only_where_it_is_passed() -> None:
    plain = child_environment({"PATH": "/bin"}, None, "r", agent=True)
    patched = child_environment(
        {"PATH": "/bin"}, {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}, "r", agent=True
    )
    speed = ("OMP_", "MKL_", "KMP_", "PYTORCH_", "CUDNN", "MALLOC")
    assert [k for k in plain if k.startswith(speed)] == []
    assert {k for k in patched if k.startswith(speed)} == {"OMP_NUM_THREADS", "MKL_NUM_THREADS"}


@pytest.mark.slow  # a real launched script beside the same script run bare
def test_the_script_sees_the_same_environment_under_launch_as_bare(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(PRINTS_ITS_ENVIRONMENT)
    user_env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWISE_")}
    user_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(tmp_path / "lib"), user_env.get("PYTHONPATH")) if p
    )
    user_env.pop("PYTHONUNBUFFERED", None)
    bare_out, launched_out = tmp_path / "bare.json", tmp_path / "launched.json"
    subprocess.run(
        [sys.executable, str(script), str(bare_out)], env=user_env, check=True, timeout=240
    )
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(user_env)
    try:
        _, result = launch(
            [sys.executable, str(script), str(launched_out)],
            RunStore(tmp_path / "store"),
            steps=1,
            timeout_s=240,
        )
    finally:
        os.environ.clear()
        os.environ.update(old)
    bare, launched = json.loads(bare_out.read_text()), json.loads(launched_out.read_text())
    assert result.status is RunStatus.OK, result.error  # type: ignore[attr-defined]
    assert _theirs(launched["env"]) == _theirs(bare["env"])
    assert (launched["threads"], launched["interop"]) == (bare["threads"], bare["interop"])
    assert _theirs(launched["child"]) == _theirs(
        bare["child"]
    )  # a process the script starts: the same
    assert launched["worker"][0] == bare["worker"][0]  # the DataLoader worker's PYTHONPATH
    assert launched["env"][
        RUN_ID_ENV
    ]  # the one mark of the run: how its whole process tree is found
