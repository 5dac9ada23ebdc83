"""What an injection did, knob by knob: acted or not, and the evidence either way.

Every knob the launcher was asked to inject ends in the report with ``acted`` (True: its effect was seen in
this run; False: it could not act, with ``why``) — never silently absent. ``refused`` tells a knob that could not
act from one nothing has reached yet (a report written while the run goes on). The experiment reads this to say
"not applied: <why>" instead of "no gain" for a fix whose effect was never there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class KnobReport:
    value: Any
    acted: bool | None = None  # None: not decided yet (nothing reached it)
    evidence: list[str] = field(default_factory=list)
    why: str | None = None
    final: bool = False  # refused for good (torch lacks the API, the script does not allow it): nothing replaces it

    def act(self, evidence: str) -> None:
        if self.final:  # refused for good: nothing seen later makes it applied
            return
        self.acted = True
        if evidence not in self.evidence:
            self.evidence.append(evidence)

    def refuse(self, why: str, final: bool = False) -> None:
        if self.acted is not True and not self.final:
            self.acted, self.why, self.final = False, why, final

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "acted": bool(self.acted),
            "refused": self.acted is False,
            "evidence": list(self.evidence),
            "why": None
            if self.acted
            else (self.why or "the script never reached the object this knob acts on"),
        }


class InjectionReport:
    """Knob reports plus the user's call sites (DataLoader, optimizer, DDP, model calls): ``sites`` holds the first
    of each kind (the contract), ``all_sites`` every distinct one (a GAN's two models and two optimizers), so the
    diff covers every place a knob acted on."""

    def __init__(self, knobs: dict[str, Any]) -> None:
        self.knobs = {k: KnobReport(v) for k, v in knobs.items()}
        self.sites: dict[str, dict[str, Any]] = {}
        self.all_sites: dict[str, list[dict[str, Any]]] = {}
        self.loader: dict[str, Any] = {}  # the training DataLoader's effective settings

    def knob(self, name: str) -> KnobReport | None:
        return self.knobs.get(name)

    def site(self, what: str, site: dict[str, Any] | None, **extra: Any) -> None:
        if site is None:
            return
        entry = {**site, **extra}
        if what not in self.sites:
            self.sites[what] = entry
        seen = self.all_sites.setdefault(what, [])
        if not any(s["file"] == entry["file"] and s["line"] == entry["line"] for s in seen):
            seen.append(entry)

    def to_json(self) -> dict[str, Any]:
        return {
            "knobs": {k: r.to_json() for k, r in self.knobs.items()},
            "sites": self.sites,
            "all_sites": self.all_sites,
            "loader": self.loader,
        }
