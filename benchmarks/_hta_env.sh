#!/usr/bin/env bash
# Creates (or reuses) the separate virtual environment that benchmarks/trace_parse.py uses to run
# Holistic Trace Analysis, so HTA's own pandas/numpy/jupyterlab never touch the project's .venv.
# Usage: bash benchmarks/_hta_env.sh [VENV_DIR]   (default: <repo>/.venv-bench; .venv-*/ is gitignored)
# HTA (holistictraceanalysis 0.5.x) does not depend on torch, so no torch wheel is pulled in here.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$REPO/.venv-bench}"
HTA_SPEC="${HTA_SPEC:-holistictraceanalysis==0.5.0}"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import hta.trace_analysis" >/dev/null 2>&1; then
  exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install -q "$HTA_SPEC" psutil
"$VENV/bin/python" -c "import hta.trace_analysis" >/dev/null
