"""Start the real dashboard and a real Chromium: used by the browser tests and ``benchmarks/dashboard.py``.

``Dashboard`` runs ``streamlit run app/main.py`` on a free port with ``STEPWISE_HOME`` pointing at a private
store, from the repository root (so ``.streamlit/config.toml`` applies), and stops exactly that process.
``chromium()`` launches Debian's ``/usr/bin/chromium`` through Playwright (``playwright install`` cannot
download browsers here).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[2]  # tests/browser/harness.py: the repository root
CHROMIUM = os.environ.get("STEPWISE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
ARTIFACTS = REPO / "test-artifacts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Dashboard:
    """A dashboard server of our own; ``url`` once :meth:`start` returned."""

    def __init__(
        self,
        home: Path,
        log: Path,
        extra_args: tuple[str, ...] = (),
        command: tuple[Path, list[str]] | None = None,
    ) -> None:
        self.home, self.log, self.extra_args, self.command = home, log, extra_args, command
        self.port = free_port()
        self.url = f"http://localhost:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 90.0) -> "Dashboard":
        port = ["--server.port", str(self.port), "--server.headless", "true", *self.extra_args]
        if self.command is not None:  # a command of the user's in that folder, on its default store
            env = {
                k: v for k, v in os.environ.items() if k not in ("STEPWISE_HOME", "STEPWISE_INDEX")
            }
            env["PYTHONUNBUFFERED"] = "1"
            cwd, cmd = self.command[0], [*self.command[1], *port]
        else:
            env = {**os.environ, "STEPWISE_HOME": str(self.home), "PYTHONUNBUFFERED": "1"}
            cwd, cmd = REPO, [sys.executable, "-m", "streamlit", "run", "app/main.py", *port]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the dashboard exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        raise TimeoutError(f"the dashboard did not answer on {self.url} within {timeout_s:g} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # a README command execs Streamlit in its own process: the same pid
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@contextmanager
def dashboard(
    home: Path,
    log: Path,
    extra_args: tuple[str, ...] = (),
    command: tuple[Path, list[str]] | None = None,
) -> Iterator[Dashboard]:
    """A dashboard on the store ``home``; with ``command`` (a folder and a command line, e.g. the README's in a
    fresh checkout), started by that command there, with no store given: ``home`` is then its default store."""
    for attempt in range(
        3
    ):  # the free port can be taken between choosing it and Streamlit binding it
        try:
            server = Dashboard(home, log, extra_args, command).start()
            break
        except RuntimeError:
            if attempt == 2 or "is not available" not in log.read_text(
                errors="replace"
            ):  # Streamlit's words
                raise
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def wait_for_app(page: Any, timeout_ms: int = 60_000, settle_ms: int = 700) -> None:
    """Wait until Streamlit has finished its script runs: no 'running' indicator on two looks ``settle_ms`` apart.

    The indicator only appears once a run has lasted 500 ms, so one look can fall in a run's first moments."""
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout_ms)
    idle = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        page.wait_for_function(idle, timeout=max(int((deadline - time.monotonic()) * 1000), 1))
        page.wait_for_timeout(settle_ms)
        if page.evaluate(idle):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the dashboard kept running for {timeout_ms} ms")
