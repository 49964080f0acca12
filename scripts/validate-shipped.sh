#!/usr/bin/env bash
# What real runs write, validated against the committed JSON Schemas by an
# independent reader ($1: a Python with jsonschema, see results-venv.sh):
# every shipped config's cells under --mock (a config this build cannot run,
# for want of a cargo feature, is said and skipped), a real quickstart, and
# a two-rank `benchkit collective` sweep; then docs/src/guide/results.md's pandas
# example on the data-parallel config's run; and MLPerf's compliance
# checker on the quickstart's mllog (ruleset 5.1.0's common rules) and on a
# real ResNet-50 cell's (ruleset 4.0.0's open ResNet rules); and HTA on the
# per-rank timelines of a real two-process cell (configs/timeline.toml,
# whose timeline event the schemas validate too, as they do the advice
# `benchkit advise` writes on that run); and those real runs added to a
# history and exported, the Parquet file read by pandas through pyarrow
# against the CSV. $2: where the runs go
# (default: a temporary directory, removed after).
set -euo pipefail
python="${1:?usage: validate-shipped.sh PYTHON [DIR]}"
here="$(cd "$(dirname "$0")/.." && pwd)"
out="${2:-$(mktemp -d)}"
mkdir -p "$out"
[ -n "${2:-}" ] || trap 'rm -rf "$out"' EXIT
# The binary `cargo test --workspace` builds (the same features and profile as
# the tests had: after them, nothing is compiled again).
cargo test -q --manifest-path "$here/Cargo.toml" --workspace --no-run
bin="$here/target/debug/benchkit"
dirs=()
for config in "$here"/configs/*.toml "$here"/configs/studies/*.toml; do
    name="$(basename "$(dirname "$config")")-$(basename "$config" .toml)"
    if [ "$(basename "$config")" = own-images.toml ]; then
        # Its data.path names the user's image folder, which is not shipped;
        # core/tests/it/book.rs runs it on a folder of real images.
        echo "skipped $config: a recipe for your own image folder"
        continue
    fi
    if "$bin" run "$config" --mock --quiet -o "$out/$name" >"$out/$name.log" 2>&1; then
        dirs+=("$out/$name")
    elif grep -q "needs benchkit built with" "$out/$name.log"; then
        echo "skipped $config: $(grep -o 'needs benchkit built with[^;]*' "$out/$name.log" | head -n 1)"
    elif [ -f "$out/$name/run.json" ]; then
        # A mock cell may fail on purpose (a flaky or failing cell); its files still count.
        dirs+=("$out/$name")
    else
        cat "$out/$name.log" >&2
        exit 1
    fi
done
"$bin" run "$here/configs/quickstart.toml" --quiet -o "$out/quickstart" >/dev/null
"$bin" report "$out/quickstart" --reporter builtin:mllog >/dev/null
dirs+=("$out/quickstart")
"$bin" run "$here/configs/mllog-resnet50.toml" --quiet -o "$out/resnet50" >/dev/null
dirs+=("$out/resnet50")
"$bin" run "$here/configs/timeline.toml" --quiet -o "$out/timeline" >/dev/null
"$bin" advise "$out/timeline" >/dev/null
test -s "$out/timeline/advice.json"
dirs+=("$out/timeline")
"$bin" collective --processes 2 --max-bytes 64K --iters 3 -o "$out/collective" >/dev/null
dirs+=("$out/collective")
"$python" "$here/scripts/validate-results.py" "${dirs[@]}"
"$python" "$here/scripts/doc-example.py" "$here/docs/src/guide/results.md" "$out/configs-data-parallel"
test -s "$out/configs-data-parallel/images_per_s.png"
"$python" "$here/scripts/mlperf-check.py" --common "$out"/quickstart/mllog-*.txt "$out"/resnet50/mllog-*.txt
"$python" "$here/scripts/mlperf-check.py" --resnet "$out"/resnet50/mllog-*.txt
"$python" "$here/scripts/hta-check.py" "$out/timeline" timeline-timeline-r1
# The real runs above in a history, exported as pandas and polars read it.
"$bin" history --db "$out/history.sqlite" add "$out/quickstart" "$out/resnet50" "$out/timeline" >/dev/null
"$bin" history --db "$out/history.sqlite" export --format parquet -o "$out/points.parquet"
"$bin" history --db "$out/history.sqlite" export -o "$out/points.csv"
"$python" "$here/scripts/history-check.py" "$out/points.parquet" "$out/points.csv"
