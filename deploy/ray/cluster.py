"""The Ray side of deploy/ray/launch.py: connecting, checking the cluster,
placing ranks in a placement group or slices as tasks, and following
their `benchkit` processes. The functions and the Worker class that run
on the cluster's nodes travel by value (this module is registered with
Ray's pickler), so nodes need Ray but not this file."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

NAMESPACE = "benchkit"
# Every variable a launcher sets, cleared in each rank before the driver's
# own are set: a worker inherits whatever started Ray.
LAUNCHER_VARS = (
    "BENCHKIT_RANK", "BENCHKIT_LAUNCHER", "BENCHKIT_SLICE_COUNT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "JOB_COMPLETION_INDEX", "MPI_LOCALRANKID",
)  # fmt: skip
LAUNCHER_PREFIXES = ("SLURM_", "OMPI_COMM_WORLD_", "PMI_")


def launcher_var(name):
    """Whether `name` is a launcher's variable, which only the driver sets in a rank."""
    return name in LAUNCHER_VARS or name.startswith(LAUNCHER_PREFIXES)

# Ports above MASTER_PORT checked free: the cells of an external launch use
# one a cell and repeat.
PORT_SPAN = 256
# The largest rank-0 run.json a resume reads its coordinator from.
RUN_FILE_MAX = 64 << 20


class Refused(Exception):
    """An input or cluster that cannot run: said before anything starts."""


def say(text):
    print(f"ray: {text}", file=sys.stderr, flush=True)


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
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
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
            what = f"{args.count} rank(s) of {each:g} {kind} each need {need:g} {kind}" if gang else (
                f"a slice needs {each:g} {kind}"
            )
            raise Refused(
                f"{what}; the cluster at {args.address} has {have:g} in all over {len(nodes)} machine(s), "
                f"at most {largest:g} on one: give fewer ranks or --{kind.lower()}s, or add machines"
            )


def exit_status(code):
    """A process's exit status as a shell reports it: 128 + the signal that ended it."""
    return 128 - code if code < 0 else code


def stream(argv, env, cwd):
    """Run `argv`, yielding ("out", line) per output line, then ("exit", status).
    The process is killed when the one that started it dies (PR_SET_PDEATHSIG)."""
    import ctypes

    prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
    full = {k: v for k, v in os.environ.items() if not launcher_var(k) and k not in env}
    full.update(env)
    proc = subprocess.Popen(
        argv,
        env=full,
        cwd=cwd if os.path.isdir(cwd) else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: prctl(1, signal.SIGKILL),
        text=True,
        errors="replace",
    )
    for line in proc.stdout:
        yield ("out", line.rstrip("\n"))
    yield ("exit", exit_status(proc.wait()))


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


def ports_free(port, span):
    """Whether `port` and the `span` ports above it can be bound here."""
    try:
        for k in range(span + 1):
            with socket.socket() as s:
                # As benchkit's listeners bind (Rust's TcpListener sets it):
                # a port whose last connections linger in TIME_WAIT is free.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("", port + k))
        return True
    except OSError:
        return False


class Worker:
    """One rank's process, in the Ray actor that holds its bundle."""

    def where(self, benchkit, config):
        return where(benchkit, config)

    def ports_free(self, port, span):
        return ports_free(port, span)

    def free_port(self, span):
        """A port below Linux's ephemeral range with `span` free above it."""
        import random

        for _ in range(200):
            port = random.randrange(20000, 32768 - span)
            if ports_free(port, span):
                return port
        raise RuntimeError(f"no {span + 1} free ports in a row between 20000 and 32768")

    def run(self, argv, env, cwd):
        yield from stream(argv, env, cwd)


class Followed:
    """Every rank's (or slice's) output, printed prefixed, and how each ended."""

    def __init__(self, ray, kind):
        self.ray = ray
        self.kind = kind
        self.lock = threading.Lock()
        self.ended = {}
        self.threads = []

    def follow(self, who, generator):
        thread = threading.Thread(target=self._follow, args=(who, generator), daemon=True)
        thread.start()
        self.threads.append(thread)

    def _follow(self, who, generator):
        status, why = None, None
        try:
            for ref in generator:
                kind, value = self.ray.get(ref)
                if kind == "out":
                    with self.lock:
                        print(f"[{who}] {value}", flush=True)
                else:
                    status = value
        except Exception as e:  # its actor or task died: killed, or its node lost
            first = str(e).splitlines()[0] if str(e) else ""
            why = f"its Ray {self.kind} ended ({type(e).__name__}: {first})"
        with self.lock:
            self.ended[who] = (status, why)

    def running(self):
        return any(t.is_alive() for t in self.threads)

    def snapshot(self):
        with self.lock:
            return dict(self.ended)

    def report(self, names):
        """One line per rank (slice): its exit status, or why it has none."""
        ended = self.snapshot()
        for who in names:
            status, why = ended.get(who, (None, "stopped by this driver"))
            say(f"{who}: " + (f"exit status {status}" if why is None else why))
        return ended


def start_ranks(ray, args):
    """The ranks' actors, each on its bundle of one placement group, checked on their nodes;
    rank 0's bundle on `args.pin` (a resumed launch's coordinator) where given."""
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    started = time.monotonic()
    bundle = {"CPU": args.cpus} | ({"GPU": args.gpus} if args.gpus > 0 else {})
    bundles = [dict(bundle) for _ in range(args.count)]
    if args.pin:
        bundles[0][f"node:{args.pin}"] = 0.001
    group = placement_group(bundles, strategy=args.strategy)
    try:
        ray.get(group.ready(), timeout=args.timeout)
    except Exception as e:
        remove_placement_group(group)
        raise Refused(
            f"{args.count} bundles of {bundle}{' (rank 0 on ' + args.pin + ')' if args.pin else ''} were not placed "
            f"({args.strategy}) within {args.timeout:g} s: the cluster's free resources are "
            f"{ray.available_resources()} ({type(e).__name__})"
        ) from e
    actor = ray.remote(Worker)
    workers = []
    try:
        for i in range(args.count):
            strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i)
            name = f"{args.output}#rank-{i}"
            options = dict(name=name, namespace=NAMESPACE, max_restarts=0, scheduling_strategy=strategy)
            workers.append(actor.options(num_cpus=args.cpus, num_gpus=args.gpus, **options).remote())
        config = None if args.resume else args.config
        places = ray.get([w.where.remote(args.benchkit, config) for w in workers], timeout=args.timeout)
    except ValueError as e:  # a named actor of that name lives: another driver launches into DIR
        stop(ray, workers, group)
        raise Refused(f"a launch into {args.output} is running ({e})") from e
    except Exception as e:
        stop(ray, workers, group)
        raise Refused(f"the ranks' actors did not start within {args.timeout:g} s ({type(e).__name__})") from e
    problems = [f"rank {i} on {p['host']}: {q}" for i, p in enumerate(places) for q in p["problems"]]
    if problems:
        stop(ray, workers, group)
        raise Refused("; ".join(problems))
    say(f"{args.count} ranks placed in {time.monotonic() - started:.2f} s: " + ", ".join(
        f"rank {i} on {p['host']} ({p['ip']})" for i, p in enumerate(places)))  # fmt: skip
    return workers, places, group


def check_nodes(ray, args):
    """Refused unless every machine of the cluster has the binary and the config."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(num_cpus=0)(where)
    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
    refs = [
        probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote(args.benchkit, args.config)
        for n in nodes
    ]
    try:
        places = ray.get(refs, timeout=args.timeout)
    except Exception as e:
        raise Refused(f"not every machine answered within {args.timeout:g} s ({type(e).__name__})") from e
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
        env.update(LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    else:
        env.update(LOCAL_RANK=str(same_node.index(i)), LOCAL_WORLD_SIZE=str(len(same_node)))
    return env


def resumed_coordinator(args):
    """A resumed launch's coordinator, as rank 0's run.json keeps it: its ranks meet there again."""
    import json

    path = os.path.join(args.output, "rank-0", "run.json")
    if not os.path.isfile(path):
        return None
    if os.path.getsize(path) > RUN_FILE_MAX:
        raise Refused(f"{path}: {os.path.getsize(path)} bytes, above the {RUN_FILE_MAX} this reads")
    try:
        with open(path, encoding="utf-8") as f:
            cells = json.load(f).get("cells", [])
        for cell in cells:
            p = cell["plan"]["train"]["parallel"]
            if p.get("launch") == "external" and p.get("processes", 1) > 1 and p.get("coordinator"):
                host, _, port = p["coordinator"].rpartition(":")
                if not (host and port.isdigit() and 1 <= int(port) <= 65535 - PORT_SPAN):
                    raise ValueError(f"coordinator {p['coordinator']!r} is not host:port, port 1 to {65535 - PORT_SPAN}")
                return host.strip("[]"), int(port)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise Refused(f"{path}: cannot read its coordinator ({e})") from e
    return None


def run_ranks(ray, args, started):
    """Every rank run to its end; rank 0's exit status. `started()` is called once nothing is refused."""
    check_resources(ray, args, gang=True)
    coordinator = resumed_coordinator(args) if args.resume else None
    args.pin = None
    if coordinator is not None:
        ips = {n.get("NodeManagerAddress") for n in ray.nodes() if n.get("Alive")}
        if coordinator[0] not in ips:
            raise Refused(
                f"rank 0 served at {coordinator[0]}:{coordinator[1]}, which a resumed run keeps, and no node of "
                f"the cluster has that address now (it has {sorted(ips)}): bring that node back, or start a new launch"
            )
        args.pin = coordinator[0]
    workers, places, group = start_ranks(ray, args)
    if coordinator is None:
        port = ray.get(workers[0].free_port.remote(PORT_SPAN), timeout=args.timeout)
    else:
        port = coordinator[1]
        if not ray.get(workers[0].ports_free.remote(port, PORT_SPAN), timeout=args.timeout):
            stop(ray, workers, group)
            raise Refused(f"rank 0's port {port} (or one of the {PORT_SPAN} above it) is taken on {args.pin}")
    started()
    followed = Followed(ray, "actor")
    for i, w in enumerate(workers):
        out = os.path.join(args.output, f"rank-{i}")
        tail = ["--resume", out] if os.path.isfile(os.path.join(out, "run.json")) else [args.config, "-o", out]
        argv = [args.benchkit, "run", *tail, *args.run_args]
        followed.follow(f"rank {i}", w.run.remote(argv, rank_env(args, places, i, port), os.getcwd()))
    say(f"started {args.count} ranks; rank 0 serves at {places[0]['ip']}:{port}")
    running = time.monotonic()
    lost_at = None
    while followed.running():
        time.sleep(0.2)
        lost = [who for who, (_, why) in followed.snapshot().items() if why is not None]
        if lost and lost_at is None:
            lost_at = time.monotonic()
            grace = "" if args.grace is None else f"; those still running in {args.grace:g} s are stopped"
            say(f"{', '.join(lost)} lost: the others name it and stop on their own{grace}")
        if lost_at is not None and args.grace is not None and time.monotonic() - lost_at > args.grace:
            say(f"stopping the ranks still running {args.grace:g} s after a rank was lost")
            stop(ray, workers, None)
            break
    ran = time.monotonic() - running
    stop(ray, workers, group)
    say(f"the ranks ran {ran:.2f} s; their actors and placement group released in {time.monotonic() - running - ran:.2f} s")
    ended = followed.report([f"rank {i}" for i in range(args.count)])
    status, _ = ended.get("rank 0", (None, None))
    return 1 if status is None else status


def run_sweep(ray, args, started):
    """Every slice, then the merge; the merge's exit status."""
    check_resources(ray, args, gang=False)
    check_nodes(ray, args)
    started()
    task = ray.remote(stream).options(num_cpus=args.cpus, num_gpus=args.gpus, max_retries=0)
    followed = Followed(ray, "task")
    for i in range(args.count):
        out = os.path.join(args.output, f"slice-{i}")
        if os.path.isfile(os.path.join(out, "run.json")):
            argv = [args.benchkit, "run", "--resume", out, *args.run_args]
        else:
            argv = [args.benchkit, "run", args.config, "--slice", f"{i}/{args.count}", "-o", out, *args.run_args]
        followed.follow(f"slice {i}", task.remote(argv, args.base_env, os.getcwd()))
    say(f"started {args.count} slices")
    for t in followed.threads:
        t.join()
    followed.report([f"slice {i}" for i in range(args.count)])
    merged, k = os.path.join(args.output, "merged"), 2
    while os.path.exists(merged):
        merged, k = os.path.join(args.output, f"merged-{k}"), k + 1
    slices = [os.path.join(args.output, f"slice-{i}") for i in range(args.count)]
    say(f"merging {args.count} slices into {merged}")
    return subprocess.run([args.benchkit, "merge", merged, *slices]).returncode
