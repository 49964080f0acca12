#!/usr/bin/env bash
# Print the environment cargo needs to build `--features tch` against the
# torch package in virtual environment $1 (default .venv-torch), for eval:
#   eval "$(scripts/tch-env.sh)" && cargo test --features tch
# A torch other than 2.9.0 also gets tch's version check bypassed.
set -euo pipefail
venv="$(cd "${1:-.venv-torch}" && pwd)"
echo "export VIRTUAL_ENV='$venv' PATH='$venv/bin':\"\$PATH\" LIBTORCH_USE_PYTORCH=1"
version="$("$venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)"
if [ -n "$version" ] && [ "$version" != "2.9.0" ]; then
    echo "export LIBTORCH_BYPASS_VERSION_CHECK=1"
fi
