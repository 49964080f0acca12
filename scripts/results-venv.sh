#!/usr/bin/env bash
# Make (or check) virtual environment $1 (default .venv-results) holding the
# independent readers of benchkit's results: PyPI's jsonschema, which
# scripts/validate-results.py checks results directories with; pandas
# with matplotlib, which docs/results.md's example reads a run with; and
# mlperf-logging, MLPerf's compliance checker (scripts/mlperf-check.py).
set -euo pipefail
venv="${1:-.venv-results}"
if ! python3 -m venv --help >/dev/null 2>&1; then
    echo "python3 with venv is needed (Debian: apt-get install python3-venv)" >&2
    exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import jsonschema, pandas, matplotlib, mlperf_logging' 2>/dev/null; then
    "$venv/bin/pip" install --quiet --no-cache-dir --disable-pip-version-check \
        "jsonschema==4.26.0" "pandas==2.3.3" "matplotlib==3.10.7" "mlperf-logging==4.1.68"
fi
