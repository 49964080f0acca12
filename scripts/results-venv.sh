#!/usr/bin/env bash
# Make (or check) virtual environment $1 (default .venv-results) holding the
# independent readers of benchkit's results: PyPI's jsonschema, which
# scripts/validate-results.py checks results directories with; pandas
# with matplotlib, which docs/src/guide/results.md's example reads a run with; and
# mlperf-logging, MLPerf's compliance checker (scripts/mlperf-check.py);
# and HolisticTraceAnalysis, which scripts/hta-check.py loads timelines with;
# and pyarrow, through which pandas reads `benchkit history export --format
# parquet` (scripts/history-check.py).
set -euo pipefail
exec "$(dirname "$0")/python-venv.sh" "${1:-.venv-results}" 'import jsonschema, pandas, matplotlib, mlperf_logging, hta, pyarrow' \
    "jsonschema==4.26.0" "pandas==2.3.3" "matplotlib==3.10.7" "mlperf-logging==4.1.68" \
    "holistictraceanalysis==0.5.0" "pyarrow==21.0.0"
