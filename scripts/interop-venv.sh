#!/usr/bin/env bash
# Make (or check) virtual environment $1 (default .venv-interop) holding the
# formats' own libraries: tensorflow-cpu (tf.io.TFRecordWriter, tf.data) and
# webdataset, with Pillow. scripts/interop.py runs in it; the tests read
# BENCHKIT_INTEROP_PYTHON=$1/bin/python to check that those libraries read
# the TFRecord and WebDataset files benchkit writes.
set -euo pipefail
exec "$(dirname "$0")/python-venv.sh" "${1:-.venv-interop}" 'import tensorflow, webdataset, PIL' \
    "tensorflow-cpu==2.21.0" "webdataset==1.0.2" "pillow==13.0.0"
