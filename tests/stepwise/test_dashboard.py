"""``stepwise dashboard``: Streamlit on the app with Stepwise's packages first on the path and the server settings of
``.streamlit/config.toml`` from any working folder, a user's own ``app.py`` there included."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from stepwise import dashboard

REPO = Path(__file__).resolve().parents[2]
STEPWISE = Path(sys.executable).with_name("stepwise")


def test_the_settings_become_flags_that_the_users_own_follow() -> None:
    args = dashboard.streamlit_args(["--server.port", "8502"], lib=REPO)
    assert args[:2] == ["run", str(REPO / "app" / "main.py")]
    assert args[-2:] == ["--server.port", "8502"]  # after ours: the last one given wins
    settings = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    for name in ("address", "enableXsrfProtection", "maxUploadSize", "fileWatcherType"):
        value = settings["server"][name]
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        assert f"--server.{name}={text}" in args
    assert "--browser.gatherUsageStats=false" in args


def test_nested_tables_and_booleans(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[server]\nheadless = true\nport = 1\n[theme.sidebar]\nbase = "dark"\n')
    assert dashboard.config_flags(config) == [
        "--server.headless=true",
        "--server.port=1",
        "--theme.sidebar.base=dark",
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_the_dashboard_runs_from_a_folder_with_its_own_app_module(tmp_path: Path) -> None:
    """Streamlit's script health check runs ``app/main.py`` once: ``ok`` only when its imports found our ``app``.
    (``python -m streamlit run …/app/main.py`` from this folder answers ``503 error``: the folder comes first.)"""
    (tmp_path / "app.py").write_text("WHO = 'user'\n")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["STEPWISE_HOME"] = str(tmp_path / "runs")
    log = (tmp_path / "dashboard.log").open("wb")
    proc = subprocess.Popen(
        [
            str(STEPWISE),
            "dashboard",
            "--server.port",
            str(port),
            "--server.scriptHealthCheckEnabled",
            "true",
        ],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        answer, deadline = "", time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(
                    f"http://localhost:{port}/_stcore/script-health-check", timeout=60
                ) as r:
                    answer = r.read().decode()
                    break
            except urllib.error.HTTPError as err:
                answer = f"{err.code} {err.read().decode()}"
                break
            except OSError:
                time.sleep(0.5)
        assert answer == "ok", (
            f"{answer!r}; log: {(tmp_path / 'dashboard.log').read_text()[-2000:]}"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
