"""The agent boundary: the code that runs inside the user's process imports the standard library and torch only.

Two checks: every module's imports, parsed (function-level ones too), name only ``sys.stdlib_module_names``,
``torch`` and the agent itself; and the whole agent, imported in the second environment (``tests.user_env``,
which has no pandas, psutil or orjson) from the folder the launcher builds, loads none of them nor any of
our other packages.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from profilers.run.agent_path import agent_folder, child_pythonpath, content_hash
from tests.test_import_direction import imported_names, module_name, python_files
from tests.user_env import user_python

ALLOWED = set(sys.stdlib_module_names) | {"torch", "stepwise_agent", "__future__"}
FORBIDDEN = (
    "pandas",
    "psutil",
    "orjson",
    "numpy_never_imported_by_us",
    "profilers",
    "advisors",
    "reports",
    "cli",
    "app",
    "sample_runs",
    "pynvml",
    "streamlit",
)


def agent_imports() -> list[tuple[str, int, str]]:
    import ast

    out = []
    for path in python_files("stepwise_agent"):
        module, is_package = module_name(path)
        for line, name in imported_names(ast.parse(path.read_text()), module, is_package):
            out.append((str(path.name), line, name))
    return out


def test_every_agent_module_imports_only_the_standard_library_and_torch() -> None:
    imports = agent_imports()
    assert len(imports) > 20  # the parser saw the modules
    bad = [
        f"{f}:{line} imports {name}"
        for f, line, name in imports
        if name.split(".")[0] not in ALLOWED
    ]
    assert bad == []


def test_the_check_sees_a_third_party_import() -> None:
    import ast

    names = [
        n
        for _, n in imported_names(
            ast.parse("import numpy as np\ndef f():\n    import psutil\n"),
            "stepwise_agent.x",
            False,
        )
    ]
    assert [n for n in names if n.split(".")[0] not in ALLOWED] == ["numpy", "psutil"]


def test_the_agent_folder_holds_the_agent_alone(tmp_path: Path) -> None:
    folder = agent_folder(tmp_path)
    assert folder.parent == tmp_path / ".agent" and folder.name == content_hash()
    assert [p.name for p in folder.iterdir()] == ["stepwise_agent"]
    assert (folder / "stepwise_agent" / "boot.py").is_file() and (
        folder / "stepwise_agent" / "inject"
    ).is_dir()
    assert agent_folder(tmp_path) == folder  # made once per content
    assert child_pythonpath(folder, {"PYTHONPATH": "/mine"}) == f"{folder}:/mine"
    assert child_pythonpath(folder, {}) == str(folder)


_PROBE = """
import json, sys
import stepwise_agent.boot, stepwise_agent.steps, stepwise_agent.inject, stepwise_agent.capabilities
import stepwise_agent.hostinfo
loaded = sorted({m.split('.')[0] for m in sys.modules})
print(json.dumps({"loaded": loaded, "agent": stepwise_agent.__file__}))
"""


@pytest.mark.slow
def test_the_whole_agent_imports_in_the_users_environment_without_our_dependencies(
    tmp_path: Path,
) -> None:
    python = user_python()
    folder = agent_folder(tmp_path)
    out = subprocess.run(
        [str(python), "-c", _PROBE],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={"PYTHONPATH": str(folder), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert facts["agent"].startswith(str(folder))
    assert "torch" in facts["loaded"] and "stepwise_agent" in facts["loaded"]
    assert [m for m in FORBIDDEN if m in facts["loaded"]] == []
    # and that environment really lacks them: the check above is not vacuous
    missing = subprocess.run(
        [str(python), "-c", "import pandas"], capture_output=True, text=True, timeout=120
    )
    assert missing.returncode != 0 and "No module named 'pandas'" in missing.stderr
