#!/usr/bin/env bash
# Build benchkit with the LibTorch backends (`tch`, `tch-cuda`) on a fresh
# x86-64 Linux machine: a virtual environment holding PyPI's torch==2.9.0,
# then cargo with `--features tch` against it. The binary records where
# LibTorch's libraries are, so it runs without LD_LIBRARY_PATH here.
#
#   scripts/setup-tch.sh                    # release build: target/release/benchkit
#   scripts/setup-tch.sh --features cuda    # extra cargo arguments are passed on
#
# BENCHKIT_TORCH_VENV picks the environment's folder (default .venv-torch).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${BENCHKIT_TORCH_VENV:-.venv-torch}"
scripts/torch-venv.sh "$venv"
eval "$(scripts/tch-env.sh "$venv")"
cargo build --release --features tch "$@"
echo "built target/release/benchkit against LibTorch in $venv"
