#!/usr/bin/env python3
"""benchkit on a Ray cluster.

ranks: one `benchkit run` over N ranks. A placement group reserves one
bundle (CPUs, GPUs) per rank; each rank's `benchkit run` starts in an actor
on its bundle with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT on rank 0's machine) and BENCHKIT_LAUNCHER=ray,
which results record as `parallel.launcher`. Every rank's output is
streamed here; the exit status is rank 0's. A rank that fails or is lost
is named by the others, which stop on their own (benchkit's lost-rank
handling); --grace S also stops those still running S seconds after a
rank's actor died. Rank i writes DIR/rank-i.

  python3 deploy/ray/launch.py ranks --ranks 2 -o results/ray CONFIG [-- RUN ARGS]
  python3 deploy/ray/launch.py ranks --resume results/ray

sweep: a config's matrix as N slices (`benchkit run --slice i/N`), each a
Ray task writing DIR/slice-i, then `benchkit merge` into DIR/merged (a
directory that holds one already gets DIR/merged-2, -3, ...).

  python3 deploy/ray/launch.py sweep --slices 4 -o results/sweep CONFIG
  python3 deploy/ray/launch.py sweep --resume results/sweep

DIR/launch.json keeps what a launch was started with, so that --resume
finishes it. Everything is checked before any rank or slice starts: the
arguments, Ray importable, the cluster reachable (--address, else
RAY_ADDRESS, else the local cluster), enough CPUs and GPUs, and the
benchkit binary and config on every machine; a refusal is one line and exit
status 2. Paths are made absolute and must be the same on every machine (a
shared file system, as for Slurm). Variables named BENCHKIT_* (but the
launcher's own), RUST_LOG, RUST_BACKTRACE, LD_LIBRARY_PATH and LIBTORCH*
travel from here to every rank, with --env NAME=VALUE for more.
"""

import argparse
import json
import os
import re
import shutil
import sys
import time

from cluster import Refused, connect, launcher_var, run_ranks, run_sweep, say

FORWARDED = ("RUST_LOG", "RUST_BACKTRACE", "LD_LIBRARY_PATH")
# What --env may not set: the launcher's variables, and the GPUs Ray gives each rank.
NOT_SETTABLE = ("CUDA_VISIBLE_DEVICES",)
# Arguments of `benchkit run` this driver gives itself.
OWN_RUN_ARGS = ("-o", "--output", "--resume", "--slice")
LAUNCH_FILE = "launch.json"
LAUNCH_FILE_MAX = 1 << 20


def parse(argv):
    """The arguments; those after `--` go to `benchkit run`."""
    run_args = []
    if "--" in argv:
        cut = argv.index("--")
        argv, run_args = argv[:cut], argv[cut + 1 :]
    top = argparse.ArgumentParser(prog="deploy/ray/launch.py", description=__doc__.split("\n\n")[0])
    modes = top.add_subparsers(dest="mode", required=True)
    for mode, unit in (("ranks", "rank"), ("sweep", "slice")):
        p = modes.add_parser(mode, description=f"see `{top.prog} --help`")
        p.add_argument("config", nargs="?", help="the config file (not with --resume)")
        p.add_argument("-o", "--output", help="results directory [default: results/ray-<config>-<UTC time>]")
        p.add_argument("--resume", metavar="DIR", help=f"finish the interrupted launch in DIR")
        p.add_argument("--address", default=os.environ.get("RAY_ADDRESS", "auto"), help="the Ray cluster")
        p.add_argument("--cpus", type=float, default=1.0, help=f"CPUs a {unit} reserves [default: 1]")
        p.add_argument("--gpus", type=float, default=0.0, help=f"GPUs a {unit} reserves [default: 0]")
        p.add_argument("--benchkit", default="benchkit", help="the benchkit binary [default: on PATH]")
        p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="set for every rank")
        p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for resources [60]")
        if mode == "ranks":
            p.add_argument("--ranks", type=int, help="processes (ranks) of the launch")
            p.add_argument("--strategy", default="PACK", choices=["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"])
            p.add_argument("--grace", type=float, help="stop the others S s after a rank's actor died [never]")
        else:
            p.add_argument("--slices", type=int, help="slices of the matrix")
    args = top.parse_args(argv)
    args.run_args = run_args
    return args


def check_args(args):
    """The arguments checked and made absolute, a resumed launch's read back; or Refused."""
    unit = "--ranks" if args.mode == "ranks" else "--slices"
    count = args.ranks if args.mode == "ranks" else args.slices
    if args.resume:
        if args.config or args.output or args.run_args:
            raise Refused("--resume DIR takes no config, -o or arguments after --: the launch's own are kept")
        args.output = os.path.abspath(args.resume)
        stored = read_launch(args.output, args.mode)
        if count is not None and count != stored["count"]:
            raise Refused(f"{args.output} was launched with {unit} {stored['count']}, not {count}")
        count, args.config, args.run_args = stored["count"], stored["config"], stored["run_args"]
    own = [a for a in args.run_args if own_run_arg(a)]
    if own:
        raise Refused(f"arguments after --: {' '.join(own)} is the launcher's own to give; leave it out")
    if not args.resume:
        if not args.config:
            raise Refused("give a config file (or --resume DIR)")
        if not os.path.isfile(args.config):
            raise Refused(f"config {args.config}: no such file")
        args.config = os.path.abspath(args.config)
        if count is None:
            raise Refused(f"give {unit} N, 1 to 1024")
        stem = os.path.splitext(os.path.basename(args.config))[0]
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        args.output = os.path.abspath(args.output or os.path.join("results", f"ray-{stem}-{stamp}"))
        if os.path.exists(args.output) and not os.path.isdir(args.output):
            raise Refused(f"-o {args.output} is a file: give a directory")
        if os.path.isdir(args.output) and os.listdir(args.output):
            raise Refused(f"-o {args.output} is not empty: give a new directory, or --resume it")
    if not 1 <= count <= 1024:
        raise Refused(f"{unit} {count}: give 1 to 1024")
    args.count = count
    limits = [("--cpus", args.cpus, 0, 1024, False), ("--gpus", args.gpus, 0, 64, True)]
    limits += [("--timeout", args.timeout, 0, 86400, False)]
    if getattr(args, "grace", None) is not None:
        limits.append(("--grace", args.grace, 0, 86400, True))
    for flag, value, low, high, low_ok in limits:
        if not (low <= value <= high) or (value == low and not low_ok):
            raise Refused(f"{flag} {value:g}: give {'' if low_ok else 'above '}{low} to {high}")
    binary = shutil.which(args.benchkit)
    if binary is None:
        raise Refused(f"--benchkit {args.benchkit}: not found here (build it, or give its path)")
    args.benchkit = os.path.abspath(binary)
    args.base_env = rank_env_base(args.env)
    return args


def own_run_arg(arg):
    """Whether `arg` is one of the `benchkit run` arguments the driver gives itself (`-o x`, `-ox`, `--output=x`)."""
    return arg.split("=")[0] in OWN_RUN_ARGS or (arg.startswith("-o") and not arg.startswith("--"))


def rank_env_base(pairs):
    """The variables every rank gets: those forwarded from here, and --env's."""
    env = {k: v for k, v in os.environ.items() if forwarded(k)}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name):
            raise Refused(f"--env {pair!r}: give NAME=VALUE, NAME an ASCII letter or _ then letters, digits or _")
        if name in NOT_SETTABLE or launcher_var(name):
            raise Refused(f"--env {name}: the launcher sets it (rank, world, coordinator, GPUs); leave it out")
        env[name] = value
    return env


def forwarded(name):
    if launcher_var(name):
        return False
    return name.startswith(("BENCHKIT_", "LIBTORCH")) or name in FORWARDED


def read_launch(out, mode):
    """What the launch in `out` was started with, checked."""
    path = os.path.join(out, LAUNCH_FILE)
    if not os.path.isdir(out):
        raise Refused(f"--resume {out}: not a directory")
    if not os.path.isfile(path):
        raise Refused(f"--resume {out}: no {LAUNCH_FILE}, so not a launch of deploy/ray/launch.py")
    if os.path.getsize(path) > LAUNCH_FILE_MAX:
        raise Refused(f"{path}: {os.path.getsize(path)} bytes, above the {LAUNCH_FILE_MAX} a launch file may hold")
    try:
        with open(path, encoding="utf-8") as f:
            stored = json.load(f)
    except (OSError, ValueError) as e:
        raise Refused(f"{path}: not readable JSON ({e})") from e
    shape = {"mode": str, "count": int, "config": str, "run_args": list}
    bad = [k for k, t in shape.items() if not isinstance(stored.get(k) if isinstance(stored, dict) else None, t)]
    if bad or not all(isinstance(a, str) for a in stored["run_args"]):
        raise Refused(f"{path}: expected mode, count, config and run_args (a list of strings); {bad} are not")
    if not os.path.isabs(stored["config"]):
        raise Refused(f"{path}: config {stored['config']!r} is not an absolute path, as the launcher writes it")
    if stored["mode"] != mode:
        raise Refused(f"{out} is a `{stored['mode']}` launch: resume it with `{stored['mode']} --resume`")
    return stored


def write_launch(args):
    os.makedirs(args.output, exist_ok=True)
    stored = {"mode": args.mode, "count": args.count, "config": args.config, "run_args": args.run_args}
    with open(os.path.join(args.output, LAUNCH_FILE), "w", encoding="utf-8") as f:
        json.dump(stored, f, indent=2)


def main(argv):
    started = time.monotonic()
    try:
        args = check_args(parse(argv))
        ray = connect(args.address)
        say(f"connected to the Ray cluster at {args.address} in {time.monotonic() - started:.2f} s")
        run = run_ranks if args.mode == "ranks" else run_sweep
        return run(ray, args, lambda: args.resume or write_launch(args))
    except Refused as e:
        say(f"error: {e}")
        return 2
    except KeyboardInterrupt:
        say("interrupted: the ranks stop with this driver (Ray ends its actors and tasks)")
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
