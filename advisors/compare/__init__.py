"""Comparing two runs: the regression gate's statistics, the step samples it reads, the movers behind a change, the two sides' diagnoses and the host contention that can explain a slowdown."""
