#!/usr/bin/env bash
# Install everything, then run the whole test suite (real-broker, browser, peer and GPU-simulator
# tests included: -m "" selects every group that plain `pytest` leaves out), on every core (at
# most 4 workers; the broker's tests share one, tests/conftest.py). --no-loadscope-reorder keeps
# the collection's order, long groups first (xdist would start the groups with most tests first,
# and leave the peer suite, two tests and five minutes, to run alone at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python -m pytest -m "" -n auto --maxprocesses 4 --dist loadgroup --no-loadscope-reorder "$@"
