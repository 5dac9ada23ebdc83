#!/usr/bin/env bash
# Type-checks the packages (mypy), lints the tree and checks its formatting (ruff check, ruff format --check; all
# configured in pyproject.toml), then runs the whole test suite, real-browser tests included (installs Debian's
# chromium when missing). Arguments go to pytest; a mypy, lint or format error fails the run before any test.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null
  else
    sudo sh -c 'apt-get update -qq && apt-get install -y -qq chromium' >/dev/null
  fi
fi
.venv/bin/python -m mypy
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Three lanes: the tests that start nothing heavy spread over both cores (pytest-xdist); the real runs,
# wall-clock waits and Chromium whose assertions do not rest on speed, spread over both cores too; then the
# ``timed`` tests (a verdict, a share of step time, a neighbour noticed) one at a time, nothing beside them.
# Arguments go to every lane; exit 5 (no test of that lane selected) counts as a pass when another lane ran tests.
set +e
workers="${STEPWISE_TEST_WORKERS:-2}"
.venv/bin/python -m pytest -m "not slow and not browser and not timed" -n "$workers" "$@"
fast=$?
# A file's tests stay on one worker (--dist loadfile): its module fixtures (a fresh clone, an install, a
# dashboard server) are built once.
.venv/bin/python -m pytest -m "(slow or browser) and not timed" -n "$workers" --dist loadfile "$@"
spread=$?
.venv/bin/python -m pytest -m "timed" "$@"
timed=$?
set -e
for rc in "$fast" "$spread" "$timed"; do
  if [ "$rc" != 0 ] && [ "$rc" != 5 ]; then exit "$rc"; fi
done
if [ "$fast" = 5 ] && [ "$spread" = 5 ] && [ "$timed" = 5 ]; then exit 5; fi
exit 0
