"""The ``stepwise`` command (:mod:`stepwise.command`) and where Stepwise's own packages live (:mod:`stepwise.lib`).

Installed, this package and :mod:`stepwise_agent` are the only top-level names Stepwise claims; ``app``, ``cli``,
``reports``, ``advisors``, ``profilers`` and ``sample_runs`` travel inside it under ``_lib`` and are importable only
in Stepwise's own processes (``setup.py`` says how). In a checkout they are the repository's folders.
"""
