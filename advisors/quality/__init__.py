"""Time to quality: judge a change by how soon training reaches the same quality, not by its step time.

``curve`` (a run's metric against wall-clock time, smoothed), ``target`` (the quality to reach and where it
came from), ``arms`` (MLPerf-style aggregation of K seeds, the ratio with its interval and the verdict),
``early_stop`` (the plateau rule's saving, measured on the run's own clock), ``candidates`` (changes that alter
convergence, each with the rule it follows), ``projection`` (the whole run's hours and cost).
"""
