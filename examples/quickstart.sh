#!/usr/bin/env bash
# The first thing to run: installs slurm-advisor into .venv and runs the demo (no Slurm needed).
#
#   bash examples/quickstart.sh [--episodes N] [--jobs N] [--seed N]
#
# Output goes to ./demo-out: results.json, jct_cdf.png and the trained model.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# torch first and pinned: its CPU build; an unpinned torch would pull GBs of CUDA libraries.
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e .
exec .venv/bin/slurm-advisor demo --out demo-out "$@"
