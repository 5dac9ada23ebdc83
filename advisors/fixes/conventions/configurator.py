"""nanoGPT's ``configurator.py`` globals: ``--compile=True``; ``--dtype=bfloat16`` only where the script's own
autocast context is live on this device."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Mapping

from advisors.fixes.conventions.editing import KnobChange, with_flag


def change(
    knobs: dict[str, Any], config: Mapping[str, Any], command: tuple[str, ...], cwd: str, proof: str
) -> KnobChange | None:
    glob = config.get("globals") or {}
    script = config.get("script")
    if not glob or not script:
        return None
    if set(knobs) == {"compile"} and isinstance(glob.get("compile"), bool):
        key, value = "compile", "True"
    elif (
        set(knobs) == {"autocast"}
        and isinstance(glob.get("dtype"), str)
        and knobs["autocast"] == "bf16"
        and any(
            a.get("enabled") and a.get("site", {}).get("file") == script
            for a in config.get("autocast") or []
        )
    ):
        key, value = "dtype", "bfloat16"  # the script's own autocast context is live here
    else:
        return None
    return KnobChange(
        with_flag(command, [f"--{key}"], value, equals=True),
        knobs,
        "configurator",
        (f"--{key}={value}",),
        script,
        _global_line(script, key),
    )


def _global_line(script: str, key: str) -> int:
    try:
        tree = ast.parse(Path(script).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return 1
    return next(
        (
            n.lineno
            for n in tree.body
            if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == key for t in n.targets)
        ),
        1,
    )
