"""``python -m advisors analyze --json`` imports only what analysis needs, run as a user runs it.

The command runs under ``-X importtime``, which names every module the process imported; the heavy ones that
analysis never uses (torch, the experiment machinery, plotting, templates, the dashboard) must not be among
them. ``--report`` does need plotting or templates: that run is the control showing the check can fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from cli.advisors import analyze
from tests.trace_factory import kernel, step, write, x

REPO = Path(__file__).resolve().parents[2]
NOT_FOR_ANALYSIS = (
    "torch",
    "plotly",
    "streamlit",
    "jinja2",
    "advisors.experiments",
    "sample_runs",
    "reports",
    "profilers.run.launch",
    "profilers.run.handle",
)
_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| +(\S+)$")


def _small_trace(tmp_path: Path) -> Path:
    events = [
        step(1, 0, 1000),
        x("aten::mm", 10, 400),
        x("cudaLaunchKernel", 20, 5, cat="cuda_runtime", correlation=1),
        kernel("sm80_gemm", 30, 500, correlation=1),
        step(2, 1000, 1000),
        x("aten::mm", 1010, 400),
    ]
    return write(tmp_path / "t.json", events)


def _analyze(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "advisors", "analyze", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    modules = {m.group(1) for line in done.stderr.splitlines() if (m := _IMPORTED.match(line))}
    return done, modules


def _heavy(modules: set[str]) -> list[str]:
    return sorted(
        m for m in modules if any(m == h or m.startswith(h + ".") for h in NOT_FOR_ANALYSIS)
    )


def test_analyze_json_imports_no_torch_plotting_or_experiments(tmp_path: Path) -> None:
    done, modules = _analyze(str(_small_trace(tmp_path)), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["steps"] == 2
    assert (
        "profilers.trace.load" in modules and "advisors.diagnosis" in modules
    )  # the parse saw the imports
    assert _heavy(modules) == []


def test_a_report_is_what_brings_plotting_in(tmp_path: Path) -> None:
    done, modules = _analyze(
        str(_small_trace(tmp_path)), "--json", "--report", str(tmp_path / "r.html")
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "r.html").is_file()
    assert "jinja2" in modules and "reports.export" in modules
    assert "torch" not in modules


def test_the_top_level_help_still_lists_every_subcommand(capsys) -> None:
    from cli.advisors import build_parser, main

    assert all(c in build_parser().format_help() for c in ("analyze", "optimize", "compare"))
    assert main(["nonsense"]) == 2  # an unknown subcommand is told the whole list
    assert (
        "analyze" in capsys.readouterr().err and "compare" in build_parser("nonsense").format_help()
    )


@pytest.mark.parametrize(
    "name, workers",
    [
        ("communication/hta_v100_2rank_216k_events.json.gz", "2"),
        pytest.param(
            "communication/hta_v100_2rank_216k_events.json.gz", "0", marks=pytest.mark.slow
        ),
        pytest.param("communication/param_dlrm_8_ranks", "2", marks=pytest.mark.slow),
    ],
)
def test_the_quick_command_prints_the_analysis_byte_for_byte(
    name: str, workers: str, shared_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``analyze FILE`` reads on parse workers started before the analysis is imported, keeps pyarrow out and
    skips the interpreter's teardown (cli.head_start): its document is the in-process analysis's (this test
    process has pyarrow), byte for byte. No summary cache: a folder's ``summaries_cached`` would differ."""
    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", "off")
    trace = shared_traces / name
    done = subprocess.run(
        [sys.executable, "-m", "advisors", "analyze", "--json", str(trace)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "STEPWISE_PARSE_WORKERS": workers},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pyarrow" in sys.modules
    assert (
        done.stdout == orjson.dumps(analyze(str(trace)), option=orjson.OPT_INDENT_2).decode() + "\n"
    )


def test_a_closed_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    """The quick exit flushes what it can; a reader that stopped early gets no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "advisors", "analyze", "--json", str(_small_trace(tmp_path))],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # like `| head -0`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) in (0, 1) and "Traceback" not in err, err


def test_the_collector_pauses_for_the_imports_and_runs_for_the_analysis(tmp_path: Path) -> None:
    """head_start pauses the cyclic GC while the analysis is imported; finish freezes what was imported and turns
    it back on before the analysis runs. Any other command line leaves it alone."""
    code = (
        "import gc, sys\nfrom cli.head_start import finish, head_start\n"
        "head_start(['list'])\nprint(gc.isenabled())\n"
        "argv = ['analyze', sys.argv[1], '--json']\nhead_start(argv)\nprint(gc.isenabled(), flush=True)\n"
        "finish(lambda: print(gc.isenabled(), gc.get_freeze_count() > 0) or 0, argv)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(_small_trace(tmp_path))],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "False", "True", "True"]
