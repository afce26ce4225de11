#!/usr/bin/env bash
# Create .venv with the CPU build of torch and this project. Usage: scripts/install.sh [test|dev]
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:-}"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# The pinned CPU build first: an unpinned torch would pull gigabytes of CUDA packages.
.venv/bin/python -m pip install --quiet torch==2.13.0
.venv/bin/python -m pip install --quiet -e ".${extra:+[$extra]}"
