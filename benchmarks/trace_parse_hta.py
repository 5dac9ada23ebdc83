"""Holistic Trace Analysis's side of the benchmark: its separate venv and the rank-file folder it reads.

HTA runs under the python of ``.venv-bench`` (made by ``benchmarks/_hta_env.sh``), so that its own pandas and
numpy never touch the project's ``.venv``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from trace_parse_common import REPO

HTA_VENV = REPO / ".venv-bench"
HTA_ENV_SCRIPT = REPO / "benchmarks" / "_hta_env.sh"


def ensure_hta_venv(venv: Path) -> str | None:
    """The python of the HTA venv, creating it (with a message) when missing. None when it cannot be made."""
    py = venv / "bin" / "python"
    ok = (
        py.exists()
        and subprocess.run(
            [str(py), "-c", "import hta.trace_analysis, psutil"], capture_output=True
        ).returncode
        == 0
    )
    if not ok:
        print(
            f"[setup] HTA venv {venv} missing or incomplete: creating it with {HTA_ENV_SCRIPT.name} "
            "(holistictraceanalysis from PyPI, about a minute)...",
            flush=True,
        )
        r = subprocess.run(["bash", str(HTA_ENV_SCRIPT), str(venv)], capture_output=True, text=True)
        if r.returncode != 0:
            print(
                f"[setup] could not create the HTA venv: {(r.stderr or r.stdout).strip()[-400:]}",
                flush=True,
            )
            return None
    return str(py)


def hta_folder(trace: Path, workdir: Path, name: str) -> Path:
    """HTA reads a folder of rank files: link the one trace there under a rank-named file name."""
    folder = workdir / f"hta-{name}"
    folder.mkdir(parents=True, exist_ok=True)
    suffix = ".json.gz" if trace.name.endswith(".gz") else ".json"
    link = folder / f"rank-0{suffix}"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(trace.resolve())
    return folder
