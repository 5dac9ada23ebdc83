#!/usr/bin/env bash
# The fast lane, while editing: every test but those marked slow (real training runs, subprocess command lines
# on real runs, wall-clock waits) and browser (real Chromium), spread over two worker processes (pytest-xdist):
# 1,170 tests in 54 s on this 2-core machine when quiet (2026-11-26; earlier figures in benchmarks/results/test-lane-2026-11-23.md).
# scripts/test.sh still runs them all, in one process (the slow tests' timing margins assume it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec .venv/bin/python -m pytest -m "not slow and not browser" -n "${STEPWISE_TEST_WORKERS:-2}" -q "$@"
