#!/usr/bin/env python3
"""benchkit on a Ray cluster.

ranks: one `benchkit run` over N ranks. A placement group reserves one
bundle (CPUs, GPUs) per rank; each rank's `benchkit run` starts in an actor
on its bundle with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT on rank 0's node) and BENCHKIT_LAUNCHER=ray,
which results record as `parallel.launcher`. Every rank's output is
streamed here; the exit status is rank 0's. When a rank fails, the others
get --grace seconds to name it and stop on their own, then are stopped.
Rank i writes DIR/rank-i.

  python3 deploy/ray/launch.py ranks --ranks 2 -o results/ray CONFIG
  python3 deploy/ray/launch.py ranks --resume results/ray

sweep: a config's matrix as N slices (`benchkit run --slice i/N`), each a
Ray task writing DIR/slice-i, then `benchkit merge` into DIR/merged (a
directory that holds one already gets DIR/merged-2, -3, ...). A slice that
holds a run.json is resumed instead.

  python3 deploy/ray/launch.py sweep --slices 4 -o results/sweep CONFIG

Everything is checked before any rank or slice starts: Ray importable, the
cluster reachable (--address, else RAY_ADDRESS, else the local cluster),
enough CPUs and GPUs, and the benchkit binary and config on every node.
Paths are made absolute and must be the same on every node (a shared
file system, as for Slurm). Variables named BENCHKIT_* (but BENCHKIT_RANK
and BENCHKIT_SLICE_COUNT), RUST_LOG, RUST_BACKTRACE, LD_LIBRARY_PATH and
LIBTORCH* travel from here to every rank, with --env NAME=VALUE for more.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

NAMESPACE = "benchkit"
FORWARDED = ("RUST_LOG", "RUST_BACKTRACE", "LD_LIBRARY_PATH")
NOT_FORWARDED = ("BENCHKIT_RANK", "BENCHKIT_SLICE_COUNT", "BENCHKIT_LAUNCHER")
# Launcher variables a worker may inherit from whoever started Ray; the
# ones the driver sets are the ones a rank reads.
CLEARED = NOT_FORWARDED + ("SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "JOB_COMPLETION_INDEX")


class Refused(Exception):
    """An input or cluster that cannot run: said before anything starts."""


def say(text):
    print(f"ray: {text}", file=sys.stderr, flush=True)


def parse(argv):
    top = argparse.ArgumentParser(prog="deploy/ray/launch.py", description=__doc__.split("\n\n")[0])
    modes = top.add_subparsers(dest="mode", required=True)
    for mode, unit in (("ranks", "rank"), ("sweep", "slice")):
        p = modes.add_parser(mode)
        p.add_argument("config", nargs="?", help="the config file (not with --resume)")
        p.add_argument("run_args", nargs=argparse.REMAINDER, help="after --: more `benchkit run` arguments")
        p.add_argument("-o", "--output", help="results directory [default: results/ray-<config>-<UTC time>]")
        p.add_argument("--resume", metavar="DIR", help=f"finish an interrupted {mode} of DIR")
        p.add_argument("--address", default=os.environ.get("RAY_ADDRESS", "auto"), help="the Ray cluster")
        p.add_argument("--cpus", type=float, default=1.0, help=f"CPUs a {unit} reserves [default: 1]")
        p.add_argument("--gpus", type=float, default=0.0, help=f"GPUs a {unit} reserves [default: 0]")
        p.add_argument("--benchkit", default="benchkit", help="the benchkit binary [default: on PATH]")
        p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="set for every rank")
        p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for resources")
        if mode == "ranks":
            p.add_argument("--ranks", type=int, help="processes (ranks) of the launch")
            p.add_argument("--strategy", default="PACK", choices=["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"])
            p.add_argument("--grace", type=float, default=60.0, help="seconds the others get once a rank fails")
        else:
            p.add_argument("--slices", type=int, help="slices of the matrix")
    args = top.parse_args(argv)
    if args.run_args and args.run_args[0] == "--":
        args.run_args = args.run_args[1:]
    return args


def check_args(args):
    """The arguments made absolute and checked, or Refused."""
    count = args.ranks if args.mode == "ranks" else args.slices
    unit = "--ranks" if args.mode == "ranks" else "--slices"
    if args.resume:
        if args.config or args.output:
            raise Refused("--resume takes the results directory alone, not a config or -o")
        args.output = os.path.abspath(args.resume)
        found = parts_of(args.output, "rank" if args.mode == "ranks" else "slice")
        if count is not None and count != found:
            raise Refused(f"{args.output} holds {found} {args.mode}, not {unit} {count}")
        count = found
    else:
        if not args.config:
            raise Refused("give a config file (or --resume DIR)")
        if not os.path.isfile(args.config):
            raise Refused(f"config {args.config}: no such file")
        args.config = os.path.abspath(args.config)
        if count is None:
            raise Refused(f"give {unit} N")
        stem = os.path.splitext(os.path.basename(args.config))[0]
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        args.output = os.path.abspath(args.output or os.path.join("results", f"ray-{stem}-{stamp}"))
        if os.path.exists(args.output) and os.listdir(args.output):
            raise Refused(f"{args.output} is not empty: give a new -o, or --resume it")
    if not 1 <= count <= 1024:
        raise Refused(f"{unit} {count}: give 1 to 1024")
    if not (0 < args.cpus <= 1024 and 0 <= args.gpus <= 64):
        raise Refused(f"--cpus {args.cpus} --gpus {args.gpus}: give above 0 to 1024 CPUs and 0 to 64 GPUs")
    args.count = count
    binary = shutil.which(args.benchkit)
    if binary is None:
        raise Refused(f"--benchkit {args.benchkit}: not found here (build it, or give its path)")
    args.benchkit = os.path.abspath(binary)
    env = {k: v for k, v in os.environ.items() if forwarded(k)}
    for pair in args.env:
        name, eq, value = pair.partition("=")
        if not eq or not name.replace("_", "").isalnum() or name in NOT_FORWARDED:
            raise Refused(f"--env {pair!r}: give NAME=VALUE, NAME letters, digits and _, not {NOT_FORWARDED}")
        env[name] = value
    args.base_env = env
    return args


def forwarded(name):
    if name in NOT_FORWARDED:
        return False
    return name.startswith(("BENCHKIT_", "LIBTORCH")) or name in FORWARDED


def parts_of(out, unit):
    """How many `unit-i` results directories `out` holds, i from 0 without gaps."""
    if not os.path.isdir(out):
        raise Refused(f"--resume {out}: no such directory")
    names = {n for n in os.listdir(out) if n.startswith(unit + "-")}
    count = len(names)
    expected = {f"{unit}-{i}" for i in range(count)}
    if count == 0 or names != expected:
        raise Refused(f"--resume {out}: expected {unit}-0 to {unit}-N, found {sorted(names) or 'none'}")
    return count


def connect(address):
    """Ray, connected to the cluster at `address`, or Refused."""
    try:
        import ray
    except ImportError as e:
        raise Refused(f"Ray is not installed for {sys.executable} ({e}): pip install 'ray>=2.10'") from e
    host, colon, port = address.rpartition(":")
    if address != "auto" and colon and port.isdigit() and not address.startswith("ray://"):
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except OSError as e:
            raise Refused(f"no Ray cluster reachable at {address} ({e}): start one with `ray start --head`") from e
    try:
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level="ERROR")
    except Exception as e:  # Ray raises ConnectionError, RuntimeError or its own
        raise Refused(f"no Ray cluster reachable at {address} ({e}): start one with `ray start --head`") from e
    return ray


def check_resources(ray, args, gang):
    """Refused unless the cluster can hold the ranks at once (`gang`) or one slice."""
    total = ray.cluster_resources()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    per_node = [n.get("Resources", {}) for n in nodes]
    for kind, each in (("CPU", args.cpus), ("GPU", args.gpus)):
        if each <= 0:
            continue
        have = total.get(kind, 0.0)
        need = each * args.count if gang else each
        largest = max((r.get(kind, 0.0) for r in per_node), default=0.0)
        if need > have or each > largest:
            what = (
                f"{args.count} rank(s) of {each:g} {kind} each need {need:g} {kind}"
                if gang
                else f"a slice needs {each:g} {kind}"
            )
            raise Refused(
                f"{what}; the cluster at {args.address} has {have:g} in all over {len(nodes)} node(s), "
                f"at most {largest:g} on one: give fewer ranks or --{kind.lower()}s, or add nodes"
            )


def die_with_parent():
    """In the child before exec: SIGKILL when the actor's process dies."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def stream(argv, env, cwd):
    """Run `argv`, yielding ("out", line) per output line, then ("exit", status)."""
    full = {k: v for k, v in os.environ.items() if k not in CLEARED}
    full.update(env)
    proc = subprocess.Popen(
        argv,
        env=full,
        cwd=cwd if os.path.isdir(cwd) else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent,
        text=True,
        errors="replace",
    )
    for line in proc.stdout:
        yield ("out", line.rstrip("\n"))
    yield ("exit", proc.wait())


def where(benchkit, config):
    """This node, and what it lacks to run `benchkit run config`."""
    import ray

    problems = []
    if not os.access(benchkit, os.X_OK):
        problems.append(f"no benchkit binary at {benchkit}")
    if config and not os.access(config, os.R_OK):
        problems.append(f"cannot read config {config}")
    return {
        "ip": ray.util.get_node_ip_address(),
        "node": ray.get_runtime_context().get_node_id(),
        "host": socket.gethostname(),
        "problems": problems,
    }


class Worker:
    """One rank's process, in the Ray actor that holds its bundle."""

    def where(self, benchkit, config):
        return where(benchkit, config)

    def free_port(self, span):
        """A port with `span` free ports above it: the coordinator's and the cells'."""
        import random

        for _ in range(200):
            port = random.randrange(20000, 32000)
            try:
                for k in range(span + 1):
                    s = socket.socket()
                    s.bind(("", port + k))
                    s.close()
                return port
            except OSError:
                continue
        raise RuntimeError("no free port range found between 20000 and 32000")

    def run(self, argv, env, cwd):
        yield from stream(argv, env, cwd)


class Printer:
    """Lines of every rank, prefixed, one at a time."""

    def __init__(self):
        self.lock = threading.Lock()

    def __call__(self, who, line):
        with self.lock:
            print(f"[{who}] {line}", flush=True)


def follow(ray, who, generator, printer, results, done):
    """Print `generator`'s lines as `who`; its exit status (or why none) into `results`."""
    status, why = None, None
    try:
        for ref in generator:
            kind, value = ray.get(ref)
            if kind == "out":
                printer(who, value)
            else:
                status = value
    except Exception as e:  # the actor died: killed, or its node lost
        why = f"its Ray actor ended ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    results[who] = (status, why)
    done.set()


def start_ranks(ray, args):
    """The ranks' actors, each on its bundle of one placement group, checked on their nodes."""
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    started = time.monotonic()
    bundle = {"CPU": args.cpus} | ({"GPU": args.gpus} if args.gpus > 0 else {})
    group = placement_group([bundle] * args.count, strategy=args.strategy)
    try:
        ray.get(group.ready(), timeout=args.timeout)
    except Exception as e:
        remove_placement_group(group)
        raise Refused(
            f"{args.count} bundles of {bundle} were not placed ({args.strategy}) within {args.timeout:g} s: "
            f"the cluster's free resources are {ray.available_resources()} ({type(e).__name__})"
        ) from e
    actor = ray.remote(Worker)
    workers = [
        actor.options(
            num_cpus=args.cpus,
            num_gpus=args.gpus,
            name=f"{args.output}#rank-{i}",
            namespace=NAMESPACE,
            max_restarts=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i),
        ).remote()
        for i in range(args.count)
    ]
    config = None if args.resume else args.config
    places = ray.get([w.where.remote(args.benchkit, config) for w in workers], timeout=args.timeout)
    problems = [f"rank {i} on {p['host']}: {q}" for i, p in enumerate(places) for q in p["problems"]]
    if problems:
        stop(ray, workers, group)
        raise Refused("; ".join(problems))
    say(f"{args.count} ranks placed in {time.monotonic() - started:.2f} s: " + ", ".join(
        f"rank {i} on {p['host']} ({p['ip']})" for i, p in enumerate(places)))
    return workers, places, group


def check_nodes(ray, args):
    """Refused unless every node of the cluster has the binary and the config."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(num_cpus=0)(where)
    config = None if args.resume else args.config
    refs = [
        probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
            args.benchkit, config
        )
        for n in ray.nodes()
        if n.get("Alive")
    ]
    places = ray.get(refs, timeout=args.timeout)
    problems = [f"node {p['host']} ({p['ip']}): {q}" for p in places for q in p["problems"]]
    if problems:
        raise Refused("; ".join(problems))


def stop(ray, workers, group):
    for w in workers:
        try:
            ray.kill(w, no_restart=True)
        except Exception:
            pass
    if group is not None:
        from ray.util.placement_group import remove_placement_group

        remove_placement_group(group)


def rank_env(args, places, i, port):
    """Rank i's launcher variables."""
    env = dict(args.base_env)
    same_node = [j for j, p in enumerate(places) if p["node"] == places[i]["node"]]
    env.update(
        RANK=str(i),
        WORLD_SIZE=str(args.count),
        MASTER_ADDR=places[0]["ip"],
        MASTER_PORT=str(port),
        BENCHKIT_LAUNCHER="ray",
    )
    if args.gpus > 0:
        # Ray gives each actor its own CUDA_VISIBLE_DEVICES: its GPUs start at 0.
        env["LOCAL_RANK"] = "0"
    else:
        env.update(LOCAL_RANK=str(same_node.index(i)), LOCAL_WORLD_SIZE=str(len(same_node)))
    return env


def run_ranks(ray, args):
    """Every rank's exit; rank 0's status."""
    workers, places, group = start_ranks(ray, args)
    port = ray.get(workers[0].free_port.remote(16))
    printer, results, done = Printer(), {}, threading.Event()
    threads = []
    for i, w in enumerate(workers):
        out = os.path.join(args.output, f"rank-{i}")
        tail = ["--resume", out] if args.resume else [args.config, "-o", out]
        argv = [args.benchkit, "run", *tail, *args.run_args]
        generator = w.run.remote(argv, rank_env(args, places, i, port), os.getcwd())
        t = threading.Thread(target=follow, args=(ray, f"rank {i}", generator, printer, results, done), daemon=True)
        t.start()
        threads.append(t)
    say(f"started {args.count} ranks; rank 0 serves at {places[0]['ip']}:{port}")
    running = time.monotonic()
    failed_at = None
    while any(t.is_alive() for t in threads):
        done.wait(0.2)
        done.clear()
        failed = [who for who, (status, why) in results.items() if status != 0]
        if failed and failed_at is None:
            failed_at = time.monotonic()
            say(f"{', '.join(failed)} failed: the others get {args.grace:g} s to stop on their own")
        if failed_at is not None and time.monotonic() - failed_at > args.grace:
            left = [f"rank {i}" for i in range(args.count) if f"rank {i}" not in results]
            say(f"stopping {', '.join(left)}: still running {args.grace:g} s after a rank failed")
            stop(ray, workers, None)
            for t in threads:
                t.join(30)
            break
    ran = time.monotonic() - running
    stop(ray, workers, group)
    say(f"the ranks ran {ran:.2f} s; their actors and placement group released in {time.monotonic() - running - ran:.2f} s")
    for i in range(args.count):
        status, why = results.get(f"rank {i}", (None, "stopped"))
        say(f"rank {i}: " + (f"exit status {status}" if why is None else why))
    status, _ = results.get("rank 0", (None, None))
    return 1 if status is None else status


def run_sweep(ray, args):
    """Every slice, then the merge; the merge's status."""
    check_nodes(ray, args)
    task = ray.remote(stream).options(num_cpus=args.cpus, num_gpus=args.gpus, max_retries=0)
    printer, results, done = Printer(), {}, threading.Event()
    threads = []
    for i in range(args.count):
        out = os.path.join(args.output, f"slice-{i}")
        if os.path.isfile(os.path.join(out, "run.json")):
            argv = [args.benchkit, "run", "--resume", out, *args.run_args]
        else:
            argv = [args.benchkit, "run", args.config, "--slice", f"{i}/{args.count}", "-o", out, *args.run_args]
        generator = task.remote(argv, args.base_env, os.getcwd())
        t = threading.Thread(target=follow, args=(ray, f"slice {i}", generator, printer, results, done), daemon=True)
        t.start()
        threads.append(t)
    say(f"started {args.count} slices")
    for t in threads:
        t.join()
    for i in range(args.count):
        status, why = results.get(f"slice {i}", (None, "stopped"))
        say(f"slice {i}: " + (f"exit status {status}" if why is None else why))
    merged = os.path.join(args.output, "merged")
    k = 2
    while os.path.exists(merged):
        merged, k = os.path.join(args.output, f"merged-{k}"), k + 1
    slices = [os.path.join(args.output, f"slice-{i}") for i in range(args.count)]
    say(f"merging {args.count} slices into {merged}")
    return subprocess.run([args.benchkit, "merge", merged, *slices]).returncode


def main(argv):
    started = time.monotonic()
    try:
        args = check_args(parse(argv))
        ray = connect(args.address)
        say(f"connected to the Ray cluster at {args.address} in {time.monotonic() - started:.2f} s")
        check_resources(ray, args, gang=args.mode == "ranks")
        return run_ranks(ray, args) if args.mode == "ranks" else run_sweep(ray, args)
    except Refused as e:
        say(f"error: {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
