"""One straggler on every surface (issue 41 item 5): the Job page, the Analysis page's Ranks tab, ``analyze --json``
(its ``straggler``, the job's, and the advisor's COMM003) and ``compare --json``'s ranks say the same rank, or the
same "no rank is marked", in the same sentence — on the 8-rank DLRM folder (one step per rank), a 2-rank folder
and a folder with a straggler planted in it. Before, the Job page read "Straggler: rank 5" on DLRM and the Ranks
tab "no rank is marked"."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cli.advisors import main
from profilers.store.runs import RunStore
from tests.app.conftest import assert_clean, open_page
from tests.job_factory import STRAGGLER, planted_job

SAID = ("Straggler:", "Rank ")  # how the straggler's sentence starts, marked or not


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code = main(list(argv))
    out = capsys.readouterr().out
    assert code in (0, 3), out
    return json.loads(out)


def _marked(sentence: str) -> int | None:
    m = re.match(r"Straggler: rank (\d+) ", sentence)
    return int(m.group(1)) if m else None


def _job_page(folder: Path) -> tuple[int | None, str]:
    at = open_page("job")
    at.text_input(key="job.folder").set_value(str(folder)).run()
    assert_clean(at)
    said = [w.value for w in at.warning] + [i.value for i in at.info]
    [sentence] = [s for s in said if s.startswith(SAID)]
    sentence = re.sub(
        r" \d+ rank\(s\) wait on it in their collectives\.$", "", sentence
    )  # the victims, apart
    return _marked(sentence), sentence


def _ranks_tab(store: RunStore, folder: Path) -> tuple[int | None, str]:
    store.import_trace(folder)
    at = open_page("analysis")
    at.session_state["stepwise.analysis_tab"] = "Ranks"
    at.run()
    assert_clean(at)
    warned = [w.value for w in at.warning if w.value.startswith(SAID)]
    captioned = [c.value for c in at.caption if c.value.startswith(SAID)]
    [sentence] = warned + captioned
    assert bool(warned) == (
        _marked(sentence) is not None
    )  # a warning exactly when a rank is marked
    return _marked(sentence), sentence


@pytest.mark.parametrize(
    "folder", ["communication/param_dlrm_8_ranks", "communication/hta_sampled_128_ranks", "planted"]
)
@pytest.mark.slow
def test_every_surface_names_the_same_straggler(
    folder: str,
    store: RunStore,
    shared_traces: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", "off")
    path = planted_job(tmp_path / "planted") if folder == "planted" else shared_traces / folder
    doc = _json(capsys, "analyze", str(path), "--json")
    s, job = doc["straggler"], doc["job"]
    sentence = doc["straggler_reason"]
    rank = None if s is None else s["rank"]
    comm003 = [
        f
        for lead in doc["findings"]
        for f in (lead, *lead.get("rules", []))
        if f["rule"] == "COMM003"
    ]
    finding = comm003[0]["evidence"]["straggler_rank"] if comm003 else None
    ranks = _json(capsys, "compare", str(path), str(path), "--json")["ranks"]["base"]
    surfaces = {
        "analyze --json": (rank, sentence),
        "analyze --json job": (
            None if job["straggler"] is None else job["straggler"]["culprit"],
            job["straggler_reason"],
        ),
        "COMM003": (finding, sentence),
        "compare --json ranks": (
            None if ranks["straggler"] is None else ranks["straggler"]["culprit"],
            ranks["straggler_reason"],
        ),
        "Job page": _job_page(path),
        "Analysis, Ranks tab": _ranks_tab(store, path),
    }
    assert all(said == (rank, sentence) for said in surfaces.values()), surfaces
    assert _marked(sentence) == rank
    if folder == "planted":
        assert rank == STRAGGLER
    else:  # neither shared job has a rank beyond the noise: DLRM's rank 5 works as long as its rank 4
        assert rank is None and "no rank is marked" in sentence
