"""Advisor → Apply and Optimise on a launched script run, with the trials faked (``script_runner`` replaced):
the page offers the injectable fixes, shows a kept fix's diff at file:line, a fix that did not act as "not
applied: …", and the fixes that need the loop rewritten as "change it yourself" with their snippet.

The run folder (launch.json, injected.json, a GPU trace) and the user's script are real files written here, so
the ScriptSpec, the strategy's context and the diff are built by the real code; only the training is skipped.
"""

from __future__ import annotations

import pytest

from advisors.experiments import trials
from app import state as app_state
from tests.app.conftest import assert_clean, fix_selector, open_page, plain
from tests.app.fake_runs import LOADER_LINE, fake_script_run, fake_script_runner


@pytest.fixture()
def script_run(store, tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    return fake_script_run(store, folder)


def _finish(at, key: str) -> None:
    job = at.session_state[key]
    assert job.wait(60), "the background job finished"
    at.run()
    assert_clean(at)
    assert job.error is None, job.error


def _diffs(at) -> list[str]:
    return [c.value for c in at.code if c.language == "diff"]


def test_launch_run_offers_apply(script_run, monkeypatch) -> None:
    runner = fake_script_runner(*script_run)
    monkeypatch.setattr(trials, "script_runner", runner)
    at = open_page("advisor")
    assert_clean(at)
    assert not any("Apply needs a run launched" in c.value for c in at.caption)
    assert fix_selector(at).value == "dataloader_workers"
    assert at.number_input(key="advisor.script_steps").value == 20
    assert not at.button(key="advisor.apply").disabled and at.button(key="advisor.optimise")
    assert any(
        "injected at boot" in plain(c.value) and "python train.py" in plain(c.value)
        for c in at.caption
    )
    assert runner.calls == []  # nothing runs before Apply


def test_kept_script_fix_shows_the_diff_at_file_and_line(script_run, monkeypatch) -> None:
    record, script = script_run
    runner = fake_script_runner(record, script)
    monkeypatch.setattr(trials, "script_runner", runner)
    at = open_page("advisor")
    at.number_input(key="advisor.trials").set_value(2)
    at.number_input(key="advisor.script_steps").set_value(7)
    at.button(key="advisor.apply").click().run()
    _finish(at, app_state.EXPERIMENT_JOB)
    assert at.success and "kept" in at.success[0].value
    assert float(at.metric[2].value.rstrip("×")) == pytest.approx(2.0, rel=0.1)
    # every trial ran the unmodified command, the patched ones with the DataLoader knobs injected
    assert {s.command for s in runner.calls} == {("python", "train.py")}
    assert {s.measure_steps for s in runner.calls} == {7}
    assert [bool(s.inject) for s in runner.calls] == [False, True, True, False]  # A B, B A
    assert any(
        f"{script}:{LOADER_LINE}" in plain(m.value)
        for m in at.markdown
        if "change to make" in m.value
    )
    [diff] = _diffs(at)
    assert "-loader = DataLoader(data, batch_size=16, shuffle=True)" in diff
    assert "+loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=" in diff
    assert "pin_memory=True" in diff  # a CUDA run: workers come with pinned memory
    assert any(
        "Injected at boot" in plain(c.value) and "num_workers" in plain(c.value) for c in at.caption
    )
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == [
        "Report with this fix (HTML)",
        "Report with this fix (MD)",
        "Report with this fix (JSON)",
    ]


def test_not_applied_fix_says_why_not_no_gain(script_run, monkeypatch) -> None:
    monkeypatch.setattr(trials, "script_runner", fake_script_runner(*script_run, acted=False))
    at = open_page("advisor")
    at.number_input(key="advisor.trials").set_value(2)
    at.button(key="advisor.apply").click().run()
    _finish(at, app_state.EXPERIMENT_JOB)
    verdicts = [plain(i.value) for i in at.info]
    assert "**Outcome: not applied: the script built no DataLoader**" in verdicts
    assert not at.success and not any("no real gain" in w.value for w in at.warning)
    assert _diffs(at) == []  # nothing to change: the fix never acted
    assert any('not a "no gain" verdict' in plain(c.value) for c in at.caption)


def test_not_injectable_fix_is_yours_to_change(script_run, monkeypatch) -> None:
    monkeypatch.setattr(trials, "script_runner", fake_script_runner(*script_run))
    at = open_page("advisor")
    assert_clean(at)
    [yours] = [plain(w.value) for w in at.warning if "change it yourself" in w.value]
    assert yours.startswith("**Fewer host-device syncs** — not injectable: change it yourself")
    assert "avoid_syncs" not in fix_selector(at).options
    assert any(
        "running = running + loss.detach()" in c.value for c in at.code if c.language == "python"
    )


def test_optimise_a_script_shows_the_diff_and_the_advice(script_run, monkeypatch) -> None:
    record, script = script_run
    monkeypatch.setattr(trials, "script_runner", fake_script_runner(record, script))
    at = open_page("advisor")
    at.number_input(key="advisor.trials").set_value(2)
    at.number_input(key="advisor.rounds").set_value(2)
    at.button(key="advisor.optimise").click().run()
    _finish(at, app_state.LADDER_JOB)
    ladder = at.table[-1].value
    assert (
        ladder["outcome"].iloc[0] == "kept"
        and ladder["fix"].iloc[0] == "DataLoader worker processes"
    )
    assert any(
        "+loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=" in d
        for d in _diffs(at)
    )
    assert any("change it yourself" in w.value and "Fewer host" in w.value for w in at.warning)
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Report with this ladder (HTML)" in labels


def test_a_script_that_is_gone_is_explained(script_run) -> None:
    _, script = script_run
    script.unlink()
    at = open_page("advisor")
    assert_clean(at)
    assert any(
        "Apply cannot run this script again" in i.value and "no such script" in plain(i.value)
        for i in at.info
    )
