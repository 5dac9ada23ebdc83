"""The one error the sample workloads raise: a workload, size, parameter or flag that does not exist or does not fit.

``sample_runs`` stands on its own (it is what a user's training code is to Stepwise: it imports torch and its data
libraries, never Stepwise's analysis), so its error is its own; Stepwise's command line turns it into its one
``error:`` line.
"""

from __future__ import annotations


class WorkloadError(ValueError):
    """``str(err)`` is one sentence a person can act on (which names exist, what to write instead)."""
