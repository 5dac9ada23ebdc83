#!/usr/bin/env bash
# Starts the Stepwise dashboard at http://localhost:8501 on the embedded default:
# a local run store in ./runs, the sample workloads, no GPU or server needed.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec .venv/bin/python -m streamlit run app/main.py "$@"
