"""The Runs page row of a two-rank script that cannot find its GPUs (slow: a real ``launch`` under
torchrun): ``failed``, its error cell ending with the script's own words (the run once read
``killed``, those words only in ``ranks/…/stdout.log``)."""

from __future__ import annotations

import json

import pytest

from cli.profilers import main as profilers_main
from tests.app.conftest import assert_clean, open_page

NO_GPUS = "Unable to locate sufficient 2 gpus to run this example. Exiting."


@pytest.mark.slow
def test_the_runs_row_of_a_rank_that_exits_1_reads_failed_with_its_words(
    store, tmp_path, capsys
) -> None:
    script = tmp_path / "main.py"
    script.write_text(
        "import sys\nimport torch\nif torch.cuda.device_count() < 2:\n"
        f"    print({NO_GPUS!r})\n    sys.exit(1)\n"
    )
    code = profilers_main(
        [
            "launch",
            "--nproc-per-node",
            "2",
            "--json",
            "--store",
            str(store.root),
            "--",
            "python",
            str(script),
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["status"] == "failed", out["error"]
    at = open_page()
    assert_clean(at)
    row = at.dataframe[0].value.iloc[0]
    assert row["status"] == "failed" and row["id"] == out["run_id"]
    assert row["error"].startswith("rank ") and row["error"].endswith(NO_GPUS), row["error"]
