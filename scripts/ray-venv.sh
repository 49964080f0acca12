#!/usr/bin/env bash
# Make (or check) virtual environment $1 (default .venv-ray) holding Ray,
# which deploy/ray/launch.py drives. The tests read
# BENCHKIT_RAY_PYTHON=$1/bin/python: they start a local Ray cluster with its
# `ray` and launch benchkit's ranks and slices through it.
set -euo pipefail
exec "$(dirname "$0")/python-venv.sh" "${1:-.venv-ray}" 'import ray' "ray==2.60.0"
