"""Print the requirements of pyproject.toml's base dependencies and the extras named on the command line, one per line
(extras that name ``stepwise[...]`` followed), for installing them before the source is there: the Dockerfile's
dependency layer. Standard library only (it runs before anything is installed).

    python scripts/requirements.py dashboard > requirements.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

_SELF = re.compile(r"^stepwise\[([^\]]+)\]")


def requirements(pyproject: Path, extras: list[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    out, seen, todo = list(project["dependencies"]), set(), list(extras)
    while todo:
        extra = todo.pop(0)
        if extra in seen:
            continue
        seen.add(extra)
        for req in project["optional-dependencies"][extra]:
            own = _SELF.match(req)
            if own:
                todo.extend(e.strip() for e in own.group(1).split(","))
            elif req not in out:
                out.append(req)
    return out


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    pyproject = next(
        p for p in (here / "pyproject.toml", here.parent / "pyproject.toml") if p.is_file()
    )
    print("\n".join(requirements(pyproject, sys.argv[1:])))
