#!/usr/bin/env bash
# Make (or check) virtual environment $1 (default .venv-interop) holding the
# formats' own libraries: tensorflow-cpu (tf.io.TFRecordWriter, tf.data) and
# webdataset, with Pillow. scripts/interop.py runs in it; the tests read
# BENCHKIT_INTEROP_PYTHON=$1/bin/python to check that those libraries read
# the TFRecord and WebDataset files benchkit writes.
set -euo pipefail
venv="${1:-.venv-interop}"
if ! python3 -m venv --help >/dev/null 2>&1; then
    echo "python3 with venv is needed (Debian: apt-get install python3-venv)" >&2
    exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import tensorflow, webdataset, PIL' 2>/dev/null; then
    "$venv/bin/pip" install --quiet --no-cache-dir --disable-pip-version-check \
        "tensorflow-cpu==2.21.0" "webdataset==1.0.2" "pillow==13.0.0"
fi
