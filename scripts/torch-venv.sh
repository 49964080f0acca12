#!/usr/bin/env bash
# Make (or check) virtual environment $1 (default .venv-torch) holding PyPI's
# torch==2.9.0: the LibTorch that burn-tch 0.21 is built against. A CUDA
# torch (PyPI's for Linux is one) also gets the CUDA compiler's and CCCL's
# headers, which c10d's NCCL headers include and the wheel lacks: with them
# the build compiles NCCL through c10d (`collective = "nccl"`).
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
cuda="$("$venv/bin/python" -c 'import torch; print(torch.version.cuda or "")' 2>/dev/null || true)"
case "$cuda" in
    12.*) headers=("nvidia-cuda-nvcc-cu12==$cuda.*" "nvidia-cuda-cccl-cu12==$cuda.*") ;;
    "") headers=() ;;
    *) headers=("nvidia-cuda-nvcc==$cuda.*" "nvidia-cuda-cccl==$cuda.*") ;;
esac
if [ "${#headers[@]}" -gt 0 ] && ! "$venv/bin/python" -c 'import nvidia.cuda_nvcc, nvidia.cuda_cccl' 2>/dev/null \
    && ! ls "$venv"/lib/python3*/site-packages/nvidia/cu*/include/crt/host_config.h >/dev/null 2>&1; then
    "$venv/bin/pip" install --quiet --no-cache-dir --disable-pip-version-check "${headers[@]}"
fi
