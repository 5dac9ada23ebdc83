"""What differs between the two inputs' environments, said before any verdict on their speed.

Two traces from different devices, or from jobs of different sizes, differ in more than code: a
verdict between them compares machines (or scales), so the comparison says so first. Read from
each side's analysis: the device's name (``deviceProperties``, else its family or kind), the world
size (a run's own, else ``distributedInfo``'s, else the ranks of a folder read), a run's batch size
where its spec records one, the torch that ran a script (its agent's record) and the CUDA version (the
one torch was built for, else the runtime a trace records). A field either side does not record is never
called a difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisors.analysis import Analysis

#: The environment's fields, in the order a difference is told.
FIELDS = ("device", "world_size", "batch", "torch", "cuda")
WORDS = {
    "device": "device",
    "world_size": "world size",
    "batch": "batch size",
    "torch": "torch",
    "cuda": "CUDA",
}


@dataclass(frozen=True)
class Environment:
    """One side's environment; None where the input does not record it."""

    device: str | None
    world_size: int | None
    batch: int | None
    torch: str | None = None
    cuda: str | None = None

    def get(self, name: str) -> Any:
        return getattr(self, name)


@dataclass(frozen=True)
class EnvironmentDiff:
    """Both sides' environments and the fields known on both sides whose values differ."""

    base: Environment
    new: Environment
    differs: tuple[str, ...]

    @property
    def note(self) -> str | None:
        """The sentence a comparison leads with when the environments differ, else None."""
        if not self.differs:
            return None
        parts = [f"{WORDS[f]} ({self.new.get(f)} vs {self.base.get(f)})" for f in self.differs]
        device = "device" in self.differs
        what = "machines" if device else "setups"
        return (
            f"B ran {'on' if device else 'with'} a different {' and '.join(parts)}: "
            f"this compares {what}, not code"
        )


def environment_of(a: Analysis) -> Environment:
    """The environment one analysis records."""
    b, run = a.breakdown, a.run
    device = b.device_label if b is not None else (run.device if run is not None else None)
    world = run.world_size if run is not None else None
    if world is None and b is not None:  # one rank file that records no world size: unknown
        world = b.world_size or (a.n_ranks if a.n_ranks > 1 else None)
    spec = run.spec if run is not None else None
    cuda = run.cuda_version if run is not None else None
    if cuda is None and b is not None:
        cuda = b.cuda_runtime
    return Environment(
        device=device,
        world_size=world,
        batch=spec.batch_size if spec else None,
        torch=run.torch_version if run is not None else None,
        cuda=cuda,
    )


def environment_diff(base: Analysis, new: Analysis) -> EnvironmentDiff:
    """What differs between ``base`` (A) and ``new`` (B): only fields both record."""
    a, b = environment_of(base), environment_of(new)
    differs = tuple(
        f for f in FIELDS if a.get(f) is not None and b.get(f) is not None and a.get(f) != b.get(f)
    )
    return EnvironmentDiff(a, b, differs)


def environment_json(d: EnvironmentDiff) -> dict[str, Any]:
    """The ``environment`` field of ``compare --json``."""
    return {
        "same": not d.differs,
        "differs": list(d.differs),
        "note": d.note,
        "base": {f: d.base.get(f) for f in FIELDS},
        "new": {f: d.new.get(f) for f in FIELDS},
    }
