"""Errors the outside world should see as a clear, one-line message (never a traceback)."""

from __future__ import annotations


class StepwiseError(Exception):
    """Base class: ``str(err)`` is one sentence a person can act on."""


class TraceError(StepwiseError):
    """The input is not a readable PyTorch Profiler / Kineto trace (or breaks a stated limit)."""


class SpecError(StepwiseError):
    """A training spec or a patch to it is invalid."""


class RunError(StepwiseError):
    """A run could not be started, found or read."""
