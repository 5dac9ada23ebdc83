"""Passive OpenMP waits, an ``env:`` fix: the launcher gives ``OMP_WAIT_POLICY=PASSIVE`` to the
patched arm's processes only, the agent checks the script had it, and the fix is tried after the
thread count's (declared in its own module)."""

from __future__ import annotations

import pytest

from advisors.experiments.script_fixes import script_patched
from advisors.fixes import ALTERNATIVES, FIXES
from advisors.fixes.context import ScriptContext
from profilers.errors import SpecError
from profilers.run.script_spec import ScriptSpec, env_knobs
from profilers.telemetry.threads import ThreadUse
from stepwise_agent.inject.environment import EnvironmentCheck
from stepwise_agent.inject.report import InjectionReport

KNOB = "env:OMP_WAIT_POLICY"


def test_the_launcher_gives_the_patched_arm_the_variable_and_only_it() -> None:
    base = ScriptSpec(command=("python", "train.py"), cwd="/x")
    patched = base.patch(inject={KNOB: "PASSIVE"})
    assert patched.launch_env() == {"OMP_WAIT_POLICY": "PASSIVE"} and base.launch_env() == {}
    both = base.patch(inject={KNOB: "PASSIVE", "num_threads": 1})
    assert both.launch_env() == {
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    assert env_knobs({KNOB: "PASSIVE", "compile": True}) == {"OMP_WAIT_POLICY": "PASSIVE"}


@pytest.mark.parametrize("knob, value", [("env:", "x"), ("env:1BAD", "x"), (KNOB, 3)])
def test_an_env_knob_names_a_variable_and_holds_text(knob: str, value: object) -> None:
    with pytest.raises(SpecError, match="environment variable"):
        ScriptSpec(command=("python", "train.py"), cwd="/x", inject={knob: value})


def test_tried_after_the_thread_count_on_threaded_runs_not_yet_passive() -> None:
    assert ALTERNATIVES["set_num_threads"][-1] == "omp_passive_waits"
    spec = ScriptSpec(command=("python", "train.py"), cwd="/x")
    fix = FIXES["omp_passive_waits"]
    two = ThreadUse(intra_op=2, cpu_count=2, affinity=2)
    patched = script_patched(spec, fix, ScriptContext(cores=2, threads=two))
    assert patched is not None and dict(patched.inject) == {KNOB: "PASSIVE"}
    passive = ThreadUse(intra_op=2, cpu_count=2, affinity=2, env={"OMP_WAIT_POLICY": "PASSIVE"})
    assert script_patched(spec, fix, ScriptContext(cores=2, threads=passive)) is None


def test_the_agent_says_the_script_had_it_or_that_the_script_changed_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    report = InjectionReport({KNOB: "PASSIVE"})
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    EnvironmentCheck({KNOB: "PASSIVE"}, report).first_step()
    k = report.to_json()["knobs"][KNOB]
    assert k["acted"] and "OMP_WAIT_POLICY=PASSIVE in the script's environment" in k["evidence"][0]
    report = InjectionReport({KNOB: "PASSIVE"})
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    EnvironmentCheck({KNOB: "PASSIVE"}, report).first_step()
    k = report.to_json()["knobs"][KNOB]
    assert not k["acted"] and "holds OMP_WAIT_POLICY='ACTIVE'" in k["why"]
