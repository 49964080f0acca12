#!/usr/bin/env bash
# Build here (x86-64 Linux, Rust, network for PyPI; no GPU needed) the one
# archive a GPU machine without Rust or network needs: a release benchkit
# with burn's CUDA kernels and LibTorch (`--features cuda,tch`) built
# against the LibTorch that machine's PyTorch has (torch 2.11.0+cu130 by
# default: BENCHKIT_TORCH_VERSION picks another), stripped; the configs and
# the data they read; and gpu-check.sh, which runs the check there.
#
#   scripts/gpu-bundle.sh [ARCHIVE]        # default target/gpu-bundle.tar.gz
#   scripts/gpu-bundle.sh --check ARCHIVE  # its listing and size checked alone
#
# On the GPU machine:
#   mkdir bundle && tar xzf gpu-bundle.tar.gz -C bundle && bundle/gpu-check.sh OUT
#
# The archive must stay under 64 MiB (what one call to a lent GPU machine
# carries); the build checks its listing and size, that the binary starts,
# and that it refuses a CUDA cell clearly on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$((64 << 20))

# Whether ARCHIVE holds what the GPU machine needs, under the limit.
check() {
    local archive="$1" size listing missing=()
    size=$(stat -c %s "$archive")
    listing="$(tar tzf "$archive")"
    for member in benchkit gpu-check.sh configs/gpu-check/resnet50.toml configs/gpu-check/quickstart.toml \
        configs/gpu-check/profile.toml configs/gpu.toml configs/gpu-profile.toml \
        configs/data/fashion-mnist/train-images-idx3-ubyte.gz; do
        grep -qx "$member" <<<"$listing" || missing+=("$member")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "$archive lacks: ${missing[*]}" >&2
        return 1
    fi
    if [ "$size" -gt "$limit" ]; then
        echo "$archive is $size bytes, over the $limit a GPU machine call carries" >&2
        return 1
    fi
    echo "$archive: $(grep -c . <<<"$listing") files, $size bytes ($(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1048576 }') MiB of 64)"
}

if [ "${1:-}" = "--check" ]; then
    check "${2:?usage: $0 --check ARCHIVE}"
    exit
fi
archive="${1:-target/gpu-bundle.tar.gz}"

venv="${BENCHKIT_TORCH_VENV:-.venv-torch-gpu}"
export BENCHKIT_TORCH_VERSION="${BENCHKIT_TORCH_VERSION:-2.11.0}"
scripts/torch-venv.sh "$venv"
eval "$(scripts/tch-env.sh "$venv")"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release --features cuda,tch -p benchkit

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp "$target/release/benchkit" "$stage/benchkit"
strip "$stage/benchkit"
cp scripts/gpu-check.sh "$stage/gpu-check.sh"
mkdir -p "$stage/configs"
cp -r configs/. "$stage/configs/"

# The binary starts, and says clearly why a CUDA cell cannot train here.
"$stage/benchkit" --version
if [ ! -e /dev/nvidiactl ]; then
    refusal="$(cd "$stage" && ./benchkit run -q configs/gpu-check/profile.toml -o "$stage/refused" 2>&1 || true)"
    if ! grep -qiE "no (cuda )?driver|no gpus? found|libcuda" <<<"$refusal"; then
        echo "the bundle's binary did not refuse a CUDA cell clearly here:" >&2
        echo "$refusal" >&2
        exit 1
    fi
    echo "refuses a CUDA cell without a GPU: $(grep -iE "no (cuda )?driver|no gpus? found|libcuda" <<<"$refusal" | head -n 1)"
    rm -rf "$stage/refused"
fi
"$stage/gpu-check.sh" --dry-run

mkdir -p "$(dirname "$archive")"
tar czf "$archive" -C "$stage" benchkit gpu-check.sh configs
check "$archive"
