#!/usr/bin/env bash
# Make (or check) virtual environment $1 (default .venv-torch) holding PyPI's
# torch==2.9.0: the LibTorch that burn-tch 0.21 is built against.
# BENCHKIT_TORCH_VERSION picks another (e.g. 2.11.0, to match a GPU machine's
# LibTorch); scripts/tch-env.sh then lets tch build against it.
set -euo pipefail
venv="${1:-.venv-torch}"
version="${BENCHKIT_TORCH_VERSION:-2.9.0}"
if ! python3 -m venv --help >/dev/null 2>&1; then
    echo "python3 with venv is needed (Debian: apt-get install python3-venv)" >&2
    exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import sys, torch; sys.exit(torch.__version__.split("+")[0] != sys.argv[1])' "$version" 2>/dev/null; then
    "$venv/bin/pip" install --quiet --no-cache-dir --disable-pip-version-check "torch==$version"
fi
