"""The Runs list in a real browser: what the grid shows for an 8-rank upload (its ranks and device, as Analysis
says them) and for an experiment (its outcome word, and the run it was started from). The grid is a canvas; its
cells are read from the accessible table it keeps beside it (``role=gridcell``)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tests.browser.flows import upload, wait_for_analysis
from tests.browser.harness import wait_for_app
from profilers.store import experiments
from profilers.store.runs import RunStore
from tests.app.fake_runs import fake_run

COLUMNS = (
    "run",
    "kind",
    "status",
    "created",
    "ms/step",
    "samples/s",
    "peak MiB",
    "device",
    "ranks",
    "error",
)


def _grid_rows(page) -> list[dict[str, str]]:
    grid = page.locator("[data-testid='stDataFrame']").first
    headers = [
        (h.text_content() or "").strip() for h in grid.locator("[role='columnheader']").all()
    ]
    cells = [(c.text_content() or "").strip() for c in grid.locator("[role='gridcell']").all()]
    width = len(headers) or len(COLUMNS)
    names = headers or list(COLUMNS)
    return [dict(zip(names, cells[i : i + width])) for i in range(0, len(cells), width)]


def test_the_runs_grid_shows_ranks_device_and_experiment_outcomes(
    server, watch, shared_traces: Path, tmp_path: Path
) -> None:
    page = watch.page
    job = tmp_path / "dlrm_8_ranks.zip"
    with zipfile.ZipFile(job, "w") as z:
        for f in sorted((shared_traces / "communication" / "param_dlrm_8_ranks").iterdir()):
            z.write(f, f.name)
    upload(page, server.url, job)
    wait_for_analysis(page)

    store = RunStore(server.home)
    source = fake_run(store, label="source run")
    exp = experiments.start(
        store,
        source.run_id,
        "apply",
        "Apply DataLoader worker processes",
        {"fix": "dataloader_workers"},
    )
    experiments.finish(
        store,
        exp.run_id,
        {
            "mode": "apply",
            "fix_id": "dataloader_workers",
            "kept": True,
            "reason": "",
            "summary": {"verdict": "kept", "speedup": 1.42},
        },
    )

    page.goto(f"{server.url}/runs")
    page.get_by_role("heading", name="Runs", exact=True).wait_for()
    wait_for_app(page)
    page.locator("[data-testid='stDataFrame'] [role='gridcell']").first.wait_for(state="attached")
    rows = {r["run"]: r for r in _grid_rows(page)}
    assert set(rows) >= {"dlrm_8_ranks.zip", "source run"}, rows
    watch.shot("runs_list_grid")
    zipped = rows["dlrm_8_ranks.zip"]
    assert zipped["kind"] == "upload" and zipped["ranks"] == "8" and zipped["device"] == "cuda"
    applied = rows["Apply DataLoader worker processes ← source run"]
    assert applied["kind"] == "experiment" and applied["status"] == "kept 1.42×"
    assert rows["source run"]["kind"] == "run" and rows["source run"]["ranks"] == "1"
    assert not watch.page_errors and not watch.dialogs
