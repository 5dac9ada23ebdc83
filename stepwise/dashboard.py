"""``stepwise dashboard [STREAMLIT OPTIONS]…``: the dashboard, served from wherever Stepwise is installed.

It is ``streamlit run <lib>/app/main.py``, run in this process, in the folder it was started from (the run store is
``$STEPWISE_HOME``, else ``./runs`` there), with:

- Stepwise's packages first on the path (the ``stepwise`` command put them there), which the pages import: a
  ``python -m streamlit`` child would put the working folder first, where a user's own ``app.py`` would win;
- the server settings of ``<lib>/.streamlit/config.toml`` (localhost only, XSRF, upload limit:
  docs/reference/dashboard.md, "Dashboard security") passed as flags, since Streamlit reads a ``.streamlit``
  folder only from the working folder. Options given after ``dashboard`` come later and win, e.g. ``--server.port 8502``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping, NoReturn, Sequence

from stepwise.lib import lib_dir

CONFIG = Path(".streamlit") / "config.toml"
USAGE = """usage: stepwise dashboard [STREAMLIT OPTIONS]…

Serves the Stepwise dashboard at http://localhost:8501 (this machine only), with runs stored in
$STEPWISE_HOME, else ./runs. Options go to `streamlit run` and override Stepwise's defaults
(.streamlit/config.toml), e.g. --server.port 8502."""


def _load_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10 (the dashboard extra brings tomli there)
        import tomli as tomllib
    with path.open("rb") as f:
        return tomllib.load(f)


def _flat(table: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in table.items():
        name = f"{prefix}{key}"
        out += _flat(value, name + ".") if isinstance(value, Mapping) else [(name, value)]
    return out


def config_flags(config: Path) -> list[str]:
    """``--section.option=value`` for every setting of a Streamlit ``config.toml``."""
    flags = []
    for name, value in _flat(_load_toml(config)):
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        flags.append(f"--{name}={text}")
    return flags


def streamlit_args(args: Sequence[str], lib: Path | None = None) -> list[str]:
    """The arguments of ``streamlit`` for ``stepwise dashboard ARGS``: ``run MAIN [our settings] [ARGS]``."""
    lib = lib or lib_dir()
    return ["run", str(lib / "app" / "main.py"), *config_flags(lib / CONFIG), *args]


def serve(args: Sequence[str]) -> NoReturn:
    """Serve until stopped (Ctrl-C stops it as it would stop ``streamlit run``); exits with Streamlit's code."""
    if "-h" in args or "--help" in args:
        print(USAGE)
        sys.exit(0)
    from streamlit.web import cli as streamlit_cli

    sys.argv = [
        "streamlit",
        *streamlit_args(args),
    ]  # Streamlit reads its command line from sys.argv too
    streamlit_cli.main(args=sys.argv[1:], prog_name="stepwise dashboard")
    sys.exit(0)  # main exits itself (standalone mode); this is never reached
