"""Reports of an experiment or a ladder on a launched script: ``where`` (file:line) and the change (the unified
diff of the user's file) in HTML, Markdown and JSON — escaped like every other string, even when the user's own
code is hostile. The trials are faked; the run folder, the script, the strategy and the diff are real."""

from __future__ import annotations

import json

import pytest

from advisors.experiments.experiment import Policy, run_experiment
from advisors.fixes import FIXES
from advisors.experiments.optimize import optimize
from advisors.experiments.results.recording import applied, ladder_record
from advisors.experiments.script_strategy import ScriptStrategy
from app.services import script_apply
from advisors.analysis import analyse
from reports.export import render
from reports.escape import markdown_text
from tests.app.fake_runs import LOADER_LINE, fake_script_run, fake_script_runner

HOSTILE = "Photos(\"</pre><script>alert('diff')</script>\")"
RAW = "<script>alert('diff')</script>"
ESCAPED = "&lt;/pre&gt;&lt;script&gt;alert(&#39;diff&#39;)&lt;/script&gt;"


@pytest.fixture()
def script_run(tmp_path):
    from profilers.store.runs import RunStore

    folder = tmp_path / "project"
    folder.mkdir()
    record, script = fake_script_run(RunStore(tmp_path / "runs"), folder, dataset=HOSTILE)
    return record, script, analyse(record.run_dir)


def _experiment(record, script, acted: bool = True):
    """An Apply as every surface reads it: its stored record (and the experiment it was built from)."""
    target = script_apply.target_of(record.run_dir, "cuda")
    strategy, fix = target.strategy(), FIXES["dataloader_workers"]
    run = fake_script_runner(record, script, acted=acted)()
    e = run_experiment(
        target.spec, fix, run, Policy(trials=2), apply=strategy.apply, proof=strategy.proof(fix)
    )
    return e, applied(e, None, "no diagnosis", None)


def _html_body(html: str) -> str:
    return html[
        : html.index("<script>")
    ]  # the page before the two inline scripts (plotly.js, bootstrap)


def test_kept_script_fix_in_every_format(script_run) -> None:
    record, script, a = script_run
    e, view = _experiment(record, script)
    assert e.kept
    where = f"{script}:{LOADER_LINE}"
    html = render(a, "html", experiment=view).decode()
    body = _html_body(html)
    assert f'Where: <code class="where">{where}</code>' in body
    assert '<pre class="change diff"><code>--- a/train.py' in body
    assert (
        f"+loader = DataLoader(Photos(&#34;{ESCAPED}&#34;), batch_size=16, shuffle=True, num_workers="
        in body
    )
    assert ESCAPED in body and RAW not in html  # the user's code is text, never markup
    assert (
        html.count("<script") == html.count('<script type="application/json"') + 2
    )  # CSP: only the two inline
    assert "Injected at boot (your file was not written)" in body

    md = render(a, "md", experiment=view).decode()
    assert "```diff\n--- a/train.py\n+++ b/train.py" in md
    assert (
        f"+loader = DataLoader({HOSTILE}, batch_size=16, shuffle=True, num_workers=" in md
    )  # literal in the fence
    assert (
        "Where: " + markdown_text(where) in md and "project/train.py" in md
    )  # a path reads as written

    doc = json.loads(render(a, "json", experiment=view))
    assert doc["experiment"]["where"] == where and doc["experiment"]["outcome"] == "kept"
    change = doc["experiment"]["change"]
    assert (
        change["kind"] == "diff" and change["file"] == str(script) and change["line"] == LOADER_LINE
    )
    assert f"-loader = DataLoader({HOSTILE}, batch_size=16, shuffle=True)" in change["text"]


def test_not_applied_script_fix_is_reported_as_such(script_run) -> None:
    record, script, a = script_run
    e, view = _experiment(record, script, acted=False)
    html = _html_body(render(a, "html", experiment=view).decode())
    # the page's word, and the runs it rests on: the fix never acted in the first patched run, so 1
    # ran per arm
    assert "Outcome: not applied: the script built no DataLoader · 1 run per arm" in html
    assert '<pre class="change' not in html  # no change to make: the fix never acted
    md = render(a, "md", experiment=view).decode()
    assert (
        "**Outcome: not applied: the script built no DataLoader**" in md
        and 'not a "no gain" verdict' in md
    )
    doc = json.loads(render(a, "json", experiment=view))
    assert (
        doc["experiment"]["not_applied"] == "the script built no DataLoader"
        and doc["experiment"]["change"] is None
    )


def test_ladder_on_a_script_in_every_format(script_run) -> None:
    record, script, a = script_run
    target = script_apply.target_of(record.run_dir, "cuda")
    run = fake_script_runner(record, script)()
    ladder = optimize(
        target.spec,
        run,
        rounds=2,
        policy=Policy(trials=2),
        device="cuda",
        strategy=ScriptStrategy(target.spec, "cuda"),
    )
    assert ladder.rungs[0].experiment.kept
    where = f"{script}:{LOADER_LINE}"
    rec = ladder_record(ladder, 2)
    html = render(a, "html", ladder=rec).decode()
    body = _html_body(html)
    assert (
        "<h2>Optimisation ladder</h2>" in body
        and f'at <code class="where">{where}</code></h3>' in body
    )
    assert ESCAPED in body and RAW not in html and 'id="fig-ladder"' in html
    assert "Not injectable: change it yourself" in body and "Fewer host-device syncs" in body
    md = render(a, "md", ladder=rec).decode()
    assert "## Optimisation ladder" in md and "```diff\n--- a/train.py" in md
    assert "### Not injectable: change it yourself" in md
    doc = json.loads(render(a, "json", ladder=rec))
    first = doc["ladder"]["rounds"][0]
    assert (
        first["where"] == where
        and first["change"]["kind"] == "diff"
        and HOSTILE in first["change"]["text"]
    )
    assert [x["fix_id"] for x in doc["ladder"]["advice"]] == ["avoid_syncs"]
    assert (
        doc["ladder"]["rounds"][0]["trials"][0]["role"] == "baseline"
    )  # its trials, with their part


def test_a_ladder_round_whose_baseline_moved_says_so_in_every_format(script_run) -> None:
    """Issue 42: "say when a round's baseline moved that much" — the record's sentence, in every report format."""
    from dataclasses import replace

    record, script, a = script_run
    target = script_apply.target_of(record.run_dir, "cuda")
    ladder = optimize(
        target.spec,
        fake_script_runner(record, script)(),
        rounds=1,
        policy=Policy(trials=2),
        device="cuda",
        strategy=ScriptStrategy(target.spec, "cuda"),
    )
    rec = ladder_record(ladder, 1)
    said = "baseline moved: round 1's baseline ran 103.1 samples/s where <b>x</b> ran the same code at 51.5"
    rec = replace(rec, rounds=(replace(rec.rounds[0], baseline_moved=said), *rec.rounds[1:]))
    body = _html_body(render(a, "html", ladder=rec).decode())
    assert (
        "baseline moved: round 1&#39;s baseline ran 103.1 samples/s where &lt;b&gt;x&lt;/b&gt;"
        in body
    )
    assert (
        f"- Round 1 ({rec.rounds[0].fix_title}): {markdown_text(said)}"
        in render(a, "md", ladder=rec).decode()
    )
    assert (
        json.loads(render(a, "json", ladder=rec))["ladder"]["rounds"][0]["baseline_moved"] == said
    )
