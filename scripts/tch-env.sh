#!/usr/bin/env bash
# Print the environment cargo needs to build `--features tch` against the
# torch package in virtual environment $1 (default .venv-torch), for eval:
#   eval "$(scripts/tch-env.sh)" && cargo test --features tch
set -euo pipefail
venv="$(cd "${1:-.venv-torch}" && pwd)"
echo "export VIRTUAL_ENV='$venv' PATH='$venv/bin':\"\$PATH\" LIBTORCH_USE_PYTORCH=1"
