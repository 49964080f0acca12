#!/usr/bin/env bash
# Make (or check) Python virtual environment $1 so that it runs the import
# statement $2, installing the pinned packages $3... from PyPI when it
# does not. The named environments (interop-venv.sh, results-venv.sh) say
# which packages and why.
set -euo pipefail
venv="${1:?usage: python-venv.sh VENV 'import a, b' PACKAGE==VERSION...}"
imports="${2:?usage: python-venv.sh VENV 'import a, b' PACKAGE==VERSION...}"
shift 2
if ! python3 -m venv --help >/dev/null 2>&1; then
    echo "python3 with venv is needed (Debian: apt-get install python3-venv)" >&2
    exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "$imports" 2>/dev/null; then
    "$venv/bin/pip" install --quiet --no-cache-dir --disable-pip-version-check "$@"
fi
