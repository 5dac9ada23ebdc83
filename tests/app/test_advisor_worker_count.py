"""The Advisor page names one DataLoader worker count for a run: the finding, the fix's snippet and
the count Apply injects agree, and the reason is said in words.

The launched script's run is a real run folder (``tests.app.fake_runs``) whose host telemetry
records 2 cores that the run kept about 47% busy while its single-process loader held the step: the
plan tries 4 workers, 2 per core, and the page says so everywhere it gives a number."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.app.conftest import assert_clean, open_page, plain
from tests.app.fake_runs import fake_script_run


def _two_core_telemetry(run_dir: Path) -> None:
    """The run's telemetry samples, each recording the machine's 2 cores."""
    path = run_dir / "telemetry.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps({**r, "cpu_count": 2}) + "\n" for r in rows))


def _texts(at) -> list[str]:
    parts = [*at.markdown, *at.caption, *at.code, *at.info, *at.warning, *at.success]
    return [plain(str(p.value)) for p in parts]


def test_one_worker_count_on_the_advisor_page(store, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    record, _ = fake_script_run(store, folder)
    _two_core_telemetry(Path(record.run_dir))
    at = open_page("advisor")
    assert_clean(at)
    texts = _texts(at)
    counts = {m for t in texts for m in re.findall(r"num_workers=(\w+)", t)}
    assert counts == {"4"}, counts  # never the formula, never 2 beside 4
    words = "trying 4: 2 per core, the loader waited while the 2 cores sat idle"
    assert any(words in t and "num_workers=4 (" in t for t in texts)  # the finding
    snippets = [c.value for c in at.code if c.language == "python"]
    assert any("num_workers=4," in s and "os.cpu_count()" in s for s in snippets)
    assert any(
        t.startswith("Apply injects") and "num_workers=4" in t and words in t
        for t in (plain(c.value) for c in at.caption)
    )
