#!/usr/bin/env bash
# The first thing to run: installs slurm-advisor into .venv, runs the demo (no Slurm needed),
# then the learning loop through the real daemon on the same embedded default.
#
#   bash examples/quickstart.sh [--episodes N] [--jobs N] [--seed N]    (the demo's options)
#
# Output goes to ./demo-out: results.json, jct_cdf.png and the trained model (the demo), and
# loop/ (the loop's store and model versions).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

for arg in "$@"; do
    if [ "$arg" = --help ] || [ "$arg" = -h ]; then  # this script's own help, then nothing runs
        sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
        echo
        echo "The demo's options:"
        if [ -x .venv/bin/slurm-advisor ]; then .venv/bin/slurm-advisor demo --help | sed -n '/^Options:/,$p'; fi
        exit 0
    fi
done

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# torch first and pinned: its CPU build; an unpinned torch would pull GBs of CUDA libraries.
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e '.[train]'
.venv/bin/slurm-advisor demo --out demo-out "$@"

echo
echo "== the learning loop: 3 cycles of run (through the daemon) -> report -> retrain -> promote"
# The loop starts with no site model: a rerun starts from an empty store and models directory.
rm -rf demo-out/loop
mkdir -p demo-out/loop
exec .venv/bin/slurm-advisor loop --db demo-out/loop/store.db --models-dir demo-out/loop/models \
    --cycles 3 --jobs 80 --episodes 30 --mode enforce
