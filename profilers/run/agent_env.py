"""The environment a launched script starts in: the user's own, plus only what the agent needs for itself.

Stepwise sets nothing that changes a program's speed (threads, ``OMP_*``/``MKL_*``/``KMP_*``, allocator or
cuDNN settings): those are fixes, set only in the patched arm of the fix under test (the spec's ``launch_env``,
passed in ``extra``). What the agent does set is listed by :func:`agent_settings`, and ``launch --json`` and the
report show that list. ``PYTHONPATH`` and ``PYTHONUNBUFFERED`` are put back to the user's values by the agent's
boot (:mod:`stepwise_agent.user_env`) before the script runs, so the script sees them as the user set them.
"""

from __future__ import annotations

import json
from typing import Mapping

from stepwise_agent.user_env import ENV as USER_ENV

RUN_ID_ENV = (
    "STEPWISE_RUN_ID"  # set in every process of a run, so its whole tree can be found and stopped
)
RESTORED = ("PYTHONPATH", "PYTHONUNBUFFERED")
_WHY = {
    "PYTHONPATH": "the agent's folder in front of yours, so the interpreter can start the agent's boot module",
    "PYTHONUNBUFFERED": "the script's output reaches its log as it is printed (live progress, the lines a "
    "failure quotes)",
    RUN_ID_ENV: "marks every process of the run, so that stopping the run stops its whole tree",
    USER_ENV: "the values of the variables above before Stepwise set them, for the agent to restore",
}


def child_environment(
    base: Mapping[str, str], extra: Mapping[str, str] | None, run_id: str, agent: bool
) -> dict[str, str]:
    """``base`` (the caller's environment) with ``extra`` (a fix's variables, the agent's ``PYTHONPATH``) and
    the run's own marks. For an agent run, the user's values of :data:`RESTORED` travel in ``STEPWISE_USER_ENV``."""
    env = {**base, **(extra or {}), "PYTHONUNBUFFERED": "1", RUN_ID_ENV: run_id}
    if agent:
        env[USER_ENV] = json.dumps({name: base.get(name) for name in RESTORED})
    return env


def agent_settings(env: Mapping[str, str]) -> list[dict[str, object]]:
    """What Stepwise set for the agent itself in ``env`` (a launched run's environment), each with why and what
    the script sees of it; the same list ``launch --json`` prints as ``agent_settings``."""
    saved = json.loads(env.get(USER_ENV) or "{}")
    rows: list[dict[str, object]] = []
    for name in (*RESTORED, RUN_ID_ENV, USER_ENV):
        if name not in env:
            continue
        restored = name in saved
        rows.append(
            {
                "name": name,
                "value": env[name],
                "why": _WHY[name],
                "script_sees": (
                    "yours, restored before the script starts"
                    if restored
                    else "unset: the agent removes it before the script starts"
                    if name == USER_ENV
                    else "this value"
                ),
                "changes_speed": False,
            }
        )
    return rows
