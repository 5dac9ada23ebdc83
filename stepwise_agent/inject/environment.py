"""``env:NAME`` knobs: an environment variable the launcher gave the patched arm's processes from
their start (``OMP_WAIT_POLICY``, read by the OpenMP runtime when torch loads it). The agent sets
nothing: at the first step it checks that the script still has the value asked for, and says so.
"""

from __future__ import annotations

import os
from typing import Any

from stepwise_agent.inject.report import InjectionReport

PREFIX = "env:"


class EnvironmentCheck:
    def __init__(self, knobs: dict[str, Any], report: InjectionReport) -> None:
        self.asked = {k[len(PREFIX) :]: str(v) for k, v in knobs.items() if k.startswith(PREFIX)}
        self.report = report

    def first_step(self) -> None:
        for name, value in self.asked.items():
            k = self.report.knob(PREFIX + name)
            if k is None:
                continue
            now = os.environ.get(name)
            if now == value:
                k.act(
                    f"{name}={value} in the script's environment from its start, before the "
                    "libraries that read it loaded"
                )
            else:
                k.refuse(
                    f"the script's environment holds {name}={now!r} at its first step, not "
                    f"{value!r}: the script sets it itself"
                )
