"""One analysis, computed once: :func:`analyse` takes any input (a trace, a folder of ranks, a zip, a memory
snapshot, a stored run folder, an upload) and returns one :class:`Analysis` that holds every number any surface
shows. ``analyze --json`` is :meth:`Analysis.to_json`; the pages, ``--report`` and the Report page render it;
a run folder keeps it (:mod:`advisors.analysis.stored`), so every door reads the same value."""

from advisors.analysis.build import SUMMARY_RANKS, analyse, with_device_memory
from advisors.analysis.value import Analysis

__all__ = ["SUMMARY_RANKS", "Analysis", "analyse", "with_device_memory"]
