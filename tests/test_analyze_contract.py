"""The ``python -m advisors analyze`` command-line contract, run as a user runs it (a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "advisors", "analyze", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def test_json_fields_and_report(shared_traces: Path, tmp_path: Path):
    out = tmp_path / "report.html"
    done = analyze(str(shared_traces / "communication/param_dlrm_8_ranks"), "--json", "--report", str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    for key in ("device", "ranks", "steps", "step_time_ms", "breakdown", "bottleneck", "confidence", "findings"):
        assert key in result
    assert result["ranks"] == list(range(8)) and result["steps"] == 1
    assert abs(sum(v["share"] for v in result["breakdown"].values()) - 1) < 0.01
    assert result["bottleneck"] == "communication"
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") or html.lstrip().lower().startswith("<!doctype html>")
    assert "communication" in html


@pytest.mark.parametrize("content, args", [
    (None, ()),
    (b"not json at all", ()),
    (b'{"traceEvents": []}', ()),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}]}', ("--report", "x.pdf")),
])
def test_bad_input_is_one_error_line_and_exit_2(tmp_path: Path, content: bytes | None, args: tuple[str, ...]):
    path = tmp_path / "input.json"
    if content is not None:
        path.write_bytes(content)
    done = analyze(str(path), *[str(tmp_path / a) if a.endswith(".pdf") else a for a in args])
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), done.stderr
    assert "Traceback" not in done.stderr
