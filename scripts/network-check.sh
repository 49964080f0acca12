#!/usr/bin/env bash
# The scaling model against measurement over emulated links: sweep each
# link (host, 10gbit, 1gbit) with `benchkit collective` at 2 ranks, run
# configs/network-check.toml (two models, 1 to 3 processes on each link),
# then predict every multi-process cell from its model's 1-process cell and
# the 2-rank sweep of its link (3 processes are predicted from 2-rank
# figures). Needs root and iproute2.
#   scripts/network-check.sh [RESULTS-DIR]   (BENCHKIT: the binary [target/debug/benchkit])
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${BENCHKIT:-target/debug/benchkit}"
out="${1:-results/network-check-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
for link in host 10gbit 1gbit; do
    "$bin" collective --processes 2 --link "$link" --min-bytes 1M --max-bytes 256M --factor 4 \
        --warmup 2 --iters 5 -o "$out/collective-$link" | grep '^#'
done
"$bin" run configs/network-check.toml -o "$out/run" --quiet
# The 1-process cells: index 0 (the quickstart model) and 7 (AlexNet).
for base in 0 7; do
    for link in host 10gbit 1gbit; do
        "$bin" predict "$out/run" --cell "$base" --link "$out/collective-$link" \
            | sed -n '/^against the measured cells/,/^wrote/p' | grep -v '^wrote'
        cp "$out/run/predict.html" "$out/predict-$base-$link.html"
        cp "$out/run/predict.json" "$out/predict-$base-$link.json"
    done
done
