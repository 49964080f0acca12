#!/usr/bin/env bash
# The first GPU's check, from the bundle scripts/gpu-bundle.sh packs (or
# from a checkout with a release build): every step planned with a wall-time
# budget, the budgets adding up to under 9.5 minutes (sized from an H200's times); each step
# runs under its budget, its output in a log of its own, and a failure or a
# step out of time is recorded and the next step runs.
#
#   ./gpu-check.sh OUT            # run every step, everything under OUT
#   ./gpu-check.sh --dry-run      # list every step, its budget and command
#
# OUT then holds: env.txt (the machine, driver, torch), one folder of
# results per `benchkit run` step and per collective sweep, logs/<step>.log,
# and summary.md: what ran, how long, what failed and why, and each cell's
# figures or its failure.
#
# BENCHKIT_PYTHON names the Python whose torch trains the PyTorch rows and
# whose LibTorch the binary loads (default /opt/torch/.venv/bin/python, else
# python3 on PATH).
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
if [ -x "$here/benchkit" ]; then
    bin="$here/benchkit"
    configs="$here/configs"
else
    bin="$here/../target/release/benchkit"
    configs="$here/../configs"
fi

# name | budget (s) | command ($B is the binary, $C the configs, $O the output folder)
read -r -d '' PLAN <<'EOF'
nvidia-smi|10|nvidia-smi && nvidia-smi -q -d CLOCK,POWER,MEMORY,COMPUTE
quickstart-cuda-cold|120|BENCHKIT_CACHE_DIR=$O/cache $B run -q $O/configs/quickstart-cuda.toml -o $O/quickstart-cuda-cold
quickstart-cuda-warm|40|BENCHKIT_CACHE_DIR=$O/cache $B run -q $O/configs/quickstart-cuda-warm.toml -o $O/quickstart-cuda-warm
resnet50-cuda-cold|120|BENCHKIT_CACHE_DIR=$O/cache $B run -q $O/configs/resnet50-cuda.toml -o $O/resnet50-cuda-cold
resnet50-cuda-warm|90|BENCHKIT_CACHE_DIR=$O/cache $B run -q $O/configs/resnet50-cuda-warm.toml -o $O/resnet50-cuda-warm
quickstart-tch-cuda|20|$B run -q $O/configs/quickstart-tch-cuda.toml -o $O/quickstart-tch-cuda
resnet50-tch-cuda|40|$B run -q $O/configs/resnet50-tch-cuda.toml -o $O/resnet50-tch-cuda
resnet50-pytorch-cuda|75|$B run -q $O/configs/resnet50-pytorch-cuda.toml -o $O/resnet50-pytorch-cuda
resnet50-ops-cuda|50|$B run -q $O/configs/resnet50-ops-cuda.toml -o $O/resnet50-ops-cuda
EOF

budget_total() {
    local total=0 name budget cmd
    while IFS='|' read -r name budget cmd; do
        total=$((total + budget))
    done <<<"$PLAN"
    echo "$total"
}

if [ "${1:-}" = "--dry-run" ]; then
    printf '%-32s %8s  %s\n' step "budget" command
    while IFS='|' read -r name budget cmd; do
        printf '%-32s %6s s  %s\n' "$name" "$budget" "$cmd"
    done <<<"$PLAN"
    printf '%-32s %6s s  (%s min; at most 9.5 min)\n' total "$(budget_total)" "$(awk -v s="$(budget_total)" 'BEGIN { printf "%.1f", s / 60 }')"
    exit 0
fi
if [ $# -ne 1 ] || [ -z "$1" ] || [ "${1#-}" != "$1" ]; then
    echo "usage: $0 OUT | --dry-run" >&2
    exit 2
fi
out="$(mkdir -p "$1" && cd "$1" && pwd)" || { echo "cannot make $1" >&2; exit 2; }
mkdir -p "$out/logs" "$out/configs"

# The machine's torch: its LibTorch for the binary, its Python for the PyTorch rows.
python="${BENCHKIT_PYTHON:-}"
if [ -z "$python" ]; then
    if [ -x /opt/torch/.venv/bin/python ]; then python=/opt/torch/.venv/bin/python; else python="$(command -v python3 || true)"; fi
fi
export BENCHKIT_PYTHON="$python"
libs="$("$python" -c 'import glob, os, torch; d = os.path.dirname(torch.__file__); print(":".join([d + "/lib"] + sorted(glob.glob(os.path.dirname(d) + "/nvidia/*/lib")) + sorted(glob.glob(os.path.dirname(d) + "/nvidia/*/*/lib"))))' 2>/dev/null || true)"
export LD_LIBRARY_PATH="${libs}${libs:+:}/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

{
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(hostname)"
    echo "binary: $bin"
    "$bin" --version 2>&1 | sed 's/^/benchkit: /'
    echo "python: $python"
    "$python" -c 'import torch; print("torch:", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())' 2>&1
    echo "LD_LIBRARY_PATH: $LD_LIBRARY_PATH"
    nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv 2>&1
    echo "cpus: $(nproc)"
} >"$out/env.txt" 2>&1

# One ResNet-50 config per engine, from the one template; burn's own
# `cuda` at batch 128 in f32 alone, with room for its steady
# warm-up (compiling with NVRTC and autotuning, at most 20 steps). The
# quickstart one engine a step, so that a Python without a CUDA torch, or
# burn's CUDA kernels still compiling, stop that step alone.
for engine in cuda tch-cuda pytorch-cuda; do
    sed "s/^backend = .*/backend = \"$engine\"/; s/^name = .*/name = \"check-resnet50-$engine\"/" \
        "$configs/gpu-check/resnet50.toml" >"$out/configs/resnet50-$engine.toml"
done
sed -i 's/^"train.batch_size" = .*/"train.batch_size" = [128]/; s/^"train.precision" = .*/"train.precision" = ["f32"]/; s/^max_steps_per_epoch = .*/max_steps_per_epoch = 30\nmax_warmup_steps = 20/; s/^cell_timeout_s = .*/cell_timeout_s = 110/' \
    "$out/configs/resnet50-cuda.toml"
# LibTorch through burn against PyTorch eager, op by op, f32 at batch 128:
# where the 0.86x goes.
sed '/^backend = "/d; s/^name = .*/name = "check-resnet50-ops"/; s/^"train.batch_size" = .*/"train.batch_size" = [128]/; s/^"train.precision" = .*/backend = ["tch-cuda", "pytorch-cuda"]\n\n[profile]\nops = true/; s/^max_steps_per_epoch = .*/max_steps_per_epoch = 11/; s/^cell_timeout_s = .*/cell_timeout_s = 45/' \
    "$configs/gpu-check/resnet50.toml" >"$out/configs/resnet50-ops-cuda.toml"
for engine in cuda tch-cuda pytorch-cuda; do
    sed "s|^backend = \[.*|backend = [\"$engine\"]|; s|^path = \"\.\./data/|path = \"$configs/data/|; s/^name = .*/name = \"check-quickstart-$engine\"/" \
        "$configs/gpu-check/quickstart.toml" >"$out/configs/quickstart-$engine.toml"
done
sed -i 's/^cell_timeout_s = .*/cell_timeout_s = 110/' "$out/configs/quickstart-cuda.toml"
# The warm steps stop their cell inside their shorter budgets, so a cell
# still compiling is recorded as stopped at its time limit, with its phase.
sed 's/^cell_timeout_s = .*/cell_timeout_s = 35/' "$out/configs/quickstart-cuda.toml" >"$out/configs/quickstart-cuda-warm.toml"
sed 's/^cell_timeout_s = .*/cell_timeout_s = 80/' "$out/configs/resnet50-cuda.toml" >"$out/configs/resnet50-cuda-warm.toml"
# burn's CUDA kernels are compiled (NVRTC) and autotuned while the first
# steps run, until the steps are steady; benchkit keeps them in its kernel
# cache (BENCHKIT_CACHE_DIR, under OUT), so each `-warm` step shows the
# start of a machine that compiled them once (its results: jit.cache = warm).

summary="$out/summary.md"
{
    echo "# GPU check"
    echo
    echo "$(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
    echo
    echo "| step | budget s | took s | result |"
    echo "|---|---:|---:|---|"
} >"$summary"

# Every 5 s while a `cuda` step runs: seconds, kernels compiled (lines of
# cubecl's tables of contents), tuning results (lines under autotune/),
# the cache's bytes, the GPU's utilisation and the CPU % of benchkit's
# processes (each over its life so far, as ps gives it), so a step that
# makes no training step still shows how fast it compiles and on what.
sample_cache() {
    local root="$1" tsv="$2" t0=$SECONDS compiled tuned bytes gpu cpu
    echo -e "s\tcompiled\ttuned\tbytes\tgpu_util_pct\tcpu_pct" >"$tsv"
    while sleep 5; do
        compiled=$(find "$root" -name toc.json.log -exec cat {} + 2>/dev/null | wc -l)
        tuned=$(find "$root" -path '*autotune*' -name '*.json.log' -exec cat {} + 2>/dev/null | wc -l)
        bytes=$(du -sb "$root" 2>/dev/null | cut -f1)
        gpu=$(nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits 2>/dev/null | head -n 1)
        cpu=$(ps -C benchkit -o pcpu= 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }')
        echo -e "$((SECONDS - t0))\t$compiled\t$tuned\t${bytes:-0}\t${gpu:-}\t${cpu:-}" >>"$tsv"
    done
}

started=$SECONDS
# The plan's names for the binary, the configs and OUT, each quoted for the shell.
printf -v qbin '%q' "$bin"
printf -v qconfigs '%q' "$configs"
printf -v qout '%q' "$out"
while IFS='|' read -r name budget cmd; do
    cmd="${cmd//\$B/"$qbin"}"
    cmd="${cmd//\$C/"$qconfigs"}"
    cmd="${cmd//\$O/"$qout"}"
    echo "== $name (budget ${budget} s): $cmd"
    t0=$SECONDS
    sampler=
    case $name in *cuda-cold | *cuda-warm) sample_cache "$out/cache/kernels" "$out/logs/$name.cache.tsv" & sampler=$! ;; esac
    timeout --kill-after=5 "$budget" bash -c "$cmd" >"$out/logs/$name.log" 2>&1 </dev/null
    rc=$?
    took=$((SECONDS - t0))
    [ -n "$sampler" ] && kill "$sampler" 2>/dev/null && wait "$sampler" 2>/dev/null
    case $rc in
        0) result="ok" ;;
        124 | 137) result="out of time (killed after ${budget} s)" ;;
        *) result="failed (exit $rc): $(grep -v '^\s*$' "$out/logs/$name.log" | tail -n 1 | tr '|' '/' | cut -c1-200)" ;;
    esac
    echo "   $result, ${took} s"
    echo "| $name | $budget | $took | $result |" >>"$summary"
done <<<"$PLAN"

echo >>"$summary"
echo "All steps: $((SECONDS - started)) s of a $(budget_total) s plan." >>"$summary"
echo >>"$summary"
for tsv in "$out"/logs/*.cache.tsv; do
    [ -f "$tsv" ] || continue
    echo "$(basename "$tsv" .cache.tsv): kernel cache at the last sample (s, compiled, tuned, bytes, GPU %, CPU %): $(tail -n 1 "$tsv" | tr '\t' ' ')" >>"$summary"
done
echo >>"$summary"

# Each cell's figures, or why it failed, from the results each run wrote;
# a cell the run planned (run.json) but never finished is listed too.
"$python" - "$out" >>"$summary" 2>&1 <<'PY'
import glob, json, os, sys

out = sys.argv[1]


def fmt(value, form):
    return form % value if isinstance(value, (int, float)) else ""


def warmup(run):
    """Warm-up steps and why they ended; compile s and the kernel cache on a JIT engine."""
    w = run.get("warmup") or {}
    text = f"{w.get('steps', '')} {w.get('ended') or ''}".strip()
    jit = run.get("jit")
    if jit:
        text += (
            f", compile {fmt(w.get('excess_s'), '%.1f')} s, first step {fmt(w.get('first_step_ms'), '%.0f')} ms, "
            f"{jit.get('cache')} cache, {jit.get('warmup_compiled')} compiled / {jit.get('warmup_tuned')} tuned "
            f"({jit.get('measured_compiled')} / {jit.get('measured_tuned')} measured)"
        )
    return text


def report(step, cell, record):
    for run in record.get("repeats") or record.get("runs") or []:
        devices = (run.get("gpu") or {}).get("devices") or []
        memory = max(((d.get("memory_mib") or {}).get("max") or 0 for d in devices), default=0)
        print(
            f"| {step} | {cell} | {run.get('backend', '')} | {run.get('precision', '')} | {run.get('batch_size', '')} "
            f"| {fmt(run.get('images_per_s'), '%.1f')} | {fmt((run.get('step_ms') or {}).get('p50'), '%.1f')} "
            f"| {fmt(run.get('data_wait_pct'), '%.1f')} | {run.get('threads') or ''} | {fmt(memory or None, '%.0f')} "
            f"| {warmup(run)} | ok |"
        )
    for failure in record.get("failures", []):
        reason = str(failure.get("reason", "")).replace("|", "/").replace("\n", " ")[:300]
        tail = " / ".join(failure.get("stderr_tail", [])[-2:]).replace("|", "/")[:200]
        print(f"| {step} | {cell} | | | | | | | | | | FAILED in step {step}: {reason} {tail} |")


print("| step | cell | backend | precision | batch | img/s | step p50 ms | data wait % | threads | gpu mem MiB | warm-up | result |")
print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---|")
for step in sorted(os.listdir(out)):
    planned = os.path.join(out, step, "run.json")
    if not os.path.isfile(planned):
        continue
    try:
        cells = [c.get("id", "?") for c in json.load(open(planned)).get("cells", [])]
    except (OSError, ValueError) as e:
        print(f"| {step} | | | | | | | | | | | run.json unreadable: {e} |")
        continue
    records = {}
    for path in sorted(glob.glob(os.path.join(out, step, "cells", "*.json"))):
        try:
            record = json.load(open(path))
            records[record.get("cell", "?")] = record
        except (OSError, ValueError) as e:
            print(f"| {step} | {os.path.basename(path)} | | | | | | | | | | unreadable: {e} |")
    for cell in cells:
        if cell in records:
            report(step, cell, records[cell])
        else:
            print(f"| {step} | {cell} | | | | | | | | | | not finished: the step ran out of time or stopped first (logs/{step}.log) |")
PY
echo "wrote $summary"
