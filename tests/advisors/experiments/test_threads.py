"""Oversubscribed threads (issue 42): the agent records torch's threads at the first step, the analyst sets them
against the cores other programs left free (HOST004), and the fix — ``torch.set_num_threads(n)`` in the script's
process, ``OMP_NUM_THREADS=n`` for it and the processes it starts — is injected and proven like any knob."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch
from torch import nn

from advisors.diagnosis import diagnose
from advisors.experiments.script_fixes import script_patched, why_not_applied
from advisors.fixes.context import ScriptContext
from advisors.experiments.script_strategy import context_of
from advisors.fixes import FIXES
from advisors.observation import run_facts
from advisors.fit import free_cores, threads_for
from advisors.rules.host.threads import OversubscribedThreads
from profilers.run.script_spec import ScriptSpec
from profilers.telemetry.threads import ThreadUse, read_threads


@pytest.fixture
def threads_kept(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """torch's thread count and the thread variables put back after the test (the knob changes them)."""
    before = torch.get_num_threads()
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(
            name, "0"
        )  # recorded as it was (absent, usually), so what the knob sets is undone
        monkeypatch.delenv(name)
    yield before
    torch.set_num_threads(before)


def _steps(inj: Any, n: int = 2, set_threads: int | None = None) -> None:
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    if set_threads is not None:
        torch.set_num_threads(set_threads)  # the script's own call, after boot
    for _ in range(n):
        loss = model(torch.randn(8, 4)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        inj.on_step()


def test_the_agent_records_the_threads_the_script_trains_with(
    injected: Any, threads_kept: int
) -> None:
    inj = injected({})
    _steps(inj)
    rec = inj.finish()["threads"]
    assert rec["intra_op"] == torch.get_num_threads() and rec["inter_op"] >= 1
    assert rec["cpu_count"] == os.cpu_count() and rec["local_processes"] == 1
    assert read_threads({"threads": rec}) == ThreadUse(
        intra_op=rec["intra_op"],
        inter_op=rec["inter_op"],
        cpu_count=rec["cpu_count"],
        affinity=rec["affinity"],
        loader_workers=None,
        env=_recorded_env(),
    )


def _recorded_env() -> dict[str, str]:
    """The thread variables of this process's environment, as the agent records them (the suite sets
    OMP_WAIT_POLICY for itself: tests/conftest.py)."""
    from stepwise_agent.inject.threads import RECORDED_VARIABLES

    return {k: os.environ[k] for k in RECORDED_VARIABLES if k in os.environ}


def test_num_threads_is_set_at_boot_and_proven_at_the_first_step(
    injected: Any, threads_kept: int
) -> None:
    torch.set_num_threads(2)  # torch's pool as the script would find it on this 2-core machine
    inj = injected({"num_threads": 1})
    assert (
        torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
    )  # its workers inherit it
    _steps(inj)
    report = inj.finish()
    knob = report["knobs"]["num_threads"]
    assert knob["acted"] and "(was 2 at boot)" in knob["evidence"][0]
    assert (
        report["threads"]["intra_op"] == 1
        and why_not_applied(FIXES["set_num_threads"], report) is None
    )


def test_a_pool_the_launchers_variables_sized_is_said_to_be_theirs(
    injected: Any, threads_kept: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "OMP_NUM_THREADS", "1"
    )  # the launcher's environment: torch started with one thread
    torch.set_num_threads(1)
    inj = injected({"num_threads": 1})
    _steps(inj)
    assert (
        "OMP_NUM_THREADS=1 from the launcher sized the pool"
        in inj.finish()["knobs"]["num_threads"]["evidence"][0]
    )


def test_a_script_that_sets_its_own_threads_after_boot_is_named(
    injected: Any, threads_kept: int
) -> None:
    inj = injected({"num_threads": 1})
    _steps(inj, set_threads=3)
    knob = inj.finish()["knobs"]["num_threads"]
    assert not knob["acted"] and "set 3 intra-op threads itself" in knob["why"]


def test_the_launcher_gives_the_script_the_thread_variables() -> None:
    spec = ScriptSpec(command=("python", "train.py"), cwd="/x", inject={"num_threads": 1})
    assert spec.launch_env() == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    assert ScriptSpec(command=("python", "train.py"), cwd="/x").launch_env() == {}


def test_free_cores_and_threads_that_fit() -> None:
    assert free_cores(2, 1.0) == 1.0 and free_cores(2, 0.2) == 2.0  # under 0.25 cores: background
    assert (
        threads_for(2, 1.0, 1) == 1 and threads_for(8, 1.5, 2) == 3 and threads_for(2, 1.9, 1) == 1
    )
    assert threads_for(16, None, 1) == 16


def test_the_fix_is_injected_with_the_threads_that_fit_and_only_when_fewer() -> None:
    spec = ScriptSpec(command=("python", "train.py"), cwd="/x")
    two = ThreadUse(intra_op=2, cpu_count=2, affinity=2)
    busy = ScriptContext(cores=2, threads=two, other_cores=1.0)
    patched = script_patched(spec, FIXES["set_num_threads"], busy)
    assert patched is not None and dict(patched.inject) == {"num_threads": 1}
    assert (
        script_patched(
            spec, FIXES["set_num_threads"], ScriptContext(cores=2, threads=two, other_cores=0.1)
        )
        is None
    )
    assert (
        script_patched(spec, FIXES["set_num_threads"], ScriptContext(cores=2)) is None
    )  # nothing recorded


def _run_dir(tmp_path: Path, threads: int, others: float) -> Path:
    """A launched script's folder: its agent's threads record and host telemetry with ``others`` cores taken."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "injected.json").write_text(
        json.dumps(
            {
                "knobs": {},
                "threads": {
                    "intra_op": threads,
                    "inter_op": 2,
                    "cpu_count": 2,
                    "affinity": 2,
                    "local_processes": 1,
                    "env": {"OMP_WAIT_POLICY": "PASSIVE"},
                },
            }
        )
    )  # a user who set it themselves
    rows = [
        {
            "t_unix_ns": int(1e9 * i / 10),
            "source": "host",
            "cpu_count": 2,
            "cpu_pct": 100.0,
            "system_cpu_pct": 100.0 * (1 + others) / 2,
        }
        for i in range(40)
    ]
    (run / "telemetry.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_a_run_folder_carries_its_threads_to_the_rule_and_the_next_fix(tmp_path: Path) -> None:
    from advisors.facts import derive
    from advisors.synthetic import observation

    run = _run_dir(tmp_path, threads=2, others=1.0)
    facts = run_facts(run)
    assert facts.threads is not None and facts.threads.demand == 2
    assert facts.telemetry is not None and facts.telemetry.other_cores == pytest.approx(
        1.0, abs=0.01
    )
    obs = observation(
        {"forward": 0.3, "backward": 0.55, "optimizer": 0.05}, device="cpu", run=facts
    )
    finding = OversubscribedThreads().evaluate(derive(obs))
    assert (
        finding is not None
        and finding.fix_id == "set_num_threads"
        and finding.evidence["suggested_threads"] == 1
    )
    assert (
        finding.evidence["omp_wait_policy"] == "PASSIVE" and "waited passively" in finding.message
    )
    d = diagnose(obs)
    assert (
        d.binding is not None and d.binding.rule == "HOST004"
    )  # it leads the operators' time, COMP002 beside it
    ctx = context_of(run, ScriptContext())
    assert ctx.threads == facts.threads and ctx.other_cores == pytest.approx(1.0, abs=0.01)
    assert (
        OversubscribedThreads().missing(derive(observation({"forward": 0.9}, device="cpu")))
        is not None
    )
