"""The user's environment, as they gave it: the runner sets a few variables that only the agent's own start needs.

``PYTHONPATH`` carries the agent's folder in front of the user's own (so ``-m stepwise_agent.boot`` imports),
and ``PYTHONUNBUFFERED=1`` sends the script's lines to its log as they are printed. Both act when the interpreter
starts; afterwards they would only leak into what the script sees and into every process it starts. The
runner hands their values from before it changed them in ``STEPWISE_USER_ENV`` (JSON: name → value, ``null``
for a variable that was unset); :func:`restore` puts them back first thing, in every rank's own boot.
"""

from __future__ import annotations

import json
import os
from typing import MutableMapping

ENV = "STEPWISE_USER_ENV"


def restore(environ: MutableMapping[str, str] | None = None) -> dict[str, str | None]:
    """Put back the variables named in ``STEPWISE_USER_ENV`` (and drop it); returns what was restored."""
    env = os.environ if environ is None else environ
    raw = env.pop(ENV, None)
    if not raw:
        return {}
    try:
        saved = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(saved, dict):
        return {}
    restored: dict[str, str | None] = {}
    for name, value in saved.items():
        if not isinstance(name, str):
            continue
        if value is None:
            env.pop(name, None)
        else:
            env[name] = str(value)
        restored[name] = value
    return restored
