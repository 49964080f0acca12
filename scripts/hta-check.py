"""Load the per-rank timeline files of one repeat of a cell with PyPI's
HolisticTraceAnalysis (HTA), as a user would load PyTorch profiler traces:

    python scripts/hta-check.py RUN_DIR STEM

where RUN_DIR holds STEM-rank<k>.json (the `timeline` reporter with
per_rank = true). Checks that HTA finds every rank by its distributedInfo,
reads each rank's steps as iterations (ProfilerStep#N) with the phases
inside them, and runs the analyses that load a CPU trace; prints which.
Exits non-zero on anything else.
"""

import glob
import json
import logging
import os
import shutil
import sys
import tempfile
import warnings

# Analyses that load a trace without GPU kernels, and those that need kernels.
LOADING = ["get_comm_comp_overlap", "get_gpu_kernel_breakdown", "get_cuda_kernel_launch_stats"]
NEED_KERNELS = ["get_temporal_breakdown", "get_idle_time_breakdown"]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    run_dir, stem = sys.argv[1], sys.argv[2]
    files = sorted(glob.glob(os.path.join(run_dir, f"{stem}-rank*.json")))
    if not files:
        sys.exit(f"{run_dir}: no {stem}-rank*.json")
    expected = {}
    for f in files:
        with open(f) as fh:
            trace = json.load(fh)
        expected[trace["distributedInfo"]["rank"]] = {
            e["args"]["step"] for e in trace["traceEvents"] if e.get("cat") == "step"
        }
    warnings.simplefilter("ignore")
    logging.disable(logging.INFO)  # HTA's progress lines
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            shutil.copy(f, tmp)
        # A benchkit step is whole: keep the last one too (HTA leaves out a
        # PyTorch trace's last step by default, as often cut short).
        analysis = TraceAnalysis(trace_dir=tmp, include_last_profiler_step=True)
        ranks = sorted(analysis.t.traces.keys())
        if ranks != sorted(expected):
            sys.exit(f"HTA found ranks {ranks}, the files hold {sorted(expected)}")
        names = analysis.t.symbol_table.sym_table
        for rank in ranks:
            df = analysis.t.get_trace(rank)
            seen = df["name"].map(lambda i: names[i])
            steps = {int(n.split("#")[1]) for n in seen if n.startswith("ProfilerStep#")}
            iterations = {int(i) for i in df["iteration"].unique() if i >= 0}
            if steps != expected[rank] or not steps <= iterations:
                sys.exit(f"rank {rank}: HTA read steps {sorted(steps)} and iterations {sorted(iterations)}, "
                         f"the file holds steps {sorted(expected[rank])}")
            for phase in ["data wait", "forward", "backward", "optimizer"]:
                inside = df[(seen == phase) & (df["iteration"] >= 0)]
                if inside.empty:
                    sys.exit(f"rank {rank}: no `{phase}` slice inside an iteration")
        for name in LOADING:
            getattr(analysis, name)(visualize=False)
        print(f"HTA {len(ranks)} ranks, {sum(len(s) for s in expected.values())} steps as iterations; "
              f"ran {', '.join(LOADING)}")
        for name in NEED_KERNELS:
            try:
                getattr(analysis, name)(visualize=False)
                print(f"  {name} also ran")
            except Exception as e:  # noqa: BLE001 - said, not hidden
                print(f"  {name} needs GPU kernels, which a benchkit timeline does not hold: "
                      f"{type(e).__name__}")


if __name__ == "__main__":
    main()
