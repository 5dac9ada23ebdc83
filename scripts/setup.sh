#!/usr/bin/env bash
# Creates .venv and installs Stepwise with everything it needs; quick when nothing changed.
# Sourced by dashboard.sh and test.sh so that each README command works on a fresh machine.
# One source of truth: pyproject.toml's dependencies and extras (dev = dashboard + samples + tests and mypy),
# installed through constraints.txt, which keeps this machine's torch (docs/how-to/install-into-your-env.md).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.11 python3; do command -v "$cand" >/dev/null 2>&1 && { PY="$cand"; break; }; done
fi
[ -d .venv ] || "$PY" -m venv .venv
STAMP=.venv/.stepwise-installed
WANT="$(cat constraints.txt pyproject.toml setup.py | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -c constraints.txt -e ".[dev]"
  # The checkout's packages by their own names from any folder in this .venv (python -m advisors|profilers, the
  # tests); an installed Stepwise keeps them under stepwise/_lib instead (setup.py).
  .venv/bin/python -c 'import sys, sysconfig; open(sysconfig.get_paths()["purelib"] + "/stepwise-checkout.pth", "w").write(sys.argv[1] + "\n")' "$ROOT"
  echo "$WANT" > "$STAMP"
fi
export PATH="$ROOT/.venv/bin:$PATH"
