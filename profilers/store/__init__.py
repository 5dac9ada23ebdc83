"""The run store: run folders and their files (``files``), the SQLite index over them (``runs``), and pinned baselines (``baselines``)."""
