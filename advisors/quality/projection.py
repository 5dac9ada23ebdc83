"""The whole run, projected: "N steps at this step time: H hours; with the kept changes: H' hours", and its cost.

Hours are ``steps × step time``; a change kept by time to target shortens the run by its ratio (it reaches the
same quality that much sooner), a step-time fix by its speed-up. The cost is hours × the price per device-hour
× the devices. A projection is arithmetic on measured numbers, said as such: it assumes the rest of the run
keeps the step time and the ratio measured here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Projection:
    steps: int
    step_ms: float
    ratio: float | None  # the kept change's: > 1 shortens the run
    price_per_hour: float | None = None
    devices: int = 1

    @property
    def hours(self) -> float:
        return self.steps * self.step_ms / 3.6e6

    @property
    def hours_after(self) -> float | None:
        return self.hours / self.ratio if self.ratio and self.ratio > 0 else None

    @property
    def cost(self) -> float | None:
        return (
            self.hours * self.price_per_hour * self.devices
            if self.price_per_hour is not None
            else None
        )

    @property
    def cost_after(self) -> float | None:
        h = self.hours_after
        return (
            h * self.price_per_hour * self.devices
            if h is not None and self.price_per_hour is not None
            else None
        )

    def sentence(self) -> str:
        out = f"{self.steps} steps at {self.step_ms:.1f} ms per step: {_h(self.hours)}"
        if self.hours_after is not None:
            out += f"; with the kept changes ({self.ratio:.2f}× sooner): {_h(self.hours_after)}"
        if self.cost is not None:
            out += f". At {self.price_per_hour:g} per device-hour × {self.devices}: {self.cost:.2f}"
            if self.cost_after is not None:
                out += f" → {self.cost_after:.2f}"
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "steps": self.steps,
            "step_ms": self.step_ms,
            "hours": self.hours,
            "ratio": self.ratio,
            "hours_after": self.hours_after,
            "price_per_hour": self.price_per_hour,
            "devices": self.devices,
            "cost": self.cost,
            "cost_after": self.cost_after,
            "text": self.sentence(),
        }


def _h(hours: float) -> str:
    """Hours from 0.1 h up; seconds below, with two significant figures under 10 s (a 0.28 s run is not "0 s")."""
    if hours >= 0.1:
        return f"{hours:.2f} hours"
    seconds = hours * 3600
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.2g} s"
