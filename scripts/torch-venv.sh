#!/usr/bin/env bash
# Make (or check) virtual environment $1 (default .venv-torch) holding PyPI's
# torch==2.9.0: the LibTorch that burn-tch 0.21 is built against.
set -euo pipefail
venv="${1:-.venv-torch}"
if ! python3 -m venv --help >/dev/null 2>&1; then
    echo "python3 with venv is needed (Debian: apt-get install python3-venv)" >&2
    exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import sys, torch; sys.exit(torch.__version__.split("+")[0] != "2.9.0")' 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check torch==2.9.0
fi
