

def synthetic_batches(count, batch, generator):
    """`count` batches of random inputs and targets of the cell's shape, in host memory."""
    batches = []
    for _ in range(count):
        images = torch.randn(batch, *CELL["input"], generator=generator)
        task, outputs = CELL["task"], CELL["outputs"]
        if task == "classify":
            target = torch.randint(0, outputs, (batch,), generator=generator)
        elif task == "multi-label":
            target = (torch.rand(batch, outputs, generator=generator) < 0.5).float()
        else:
            # <start>, then ids of real tokens (0 is padding).
            target = torch.randint(1, outputs, (batch, CELL["tokens"] + 1), generator=generator)
            target[:, 0] = CELL["start_token"]
        if torch.cuda.is_available():
            images, target = images.pin_memory(), target.pin_memory()
        batches.append((images, target))
    return batches


def loss_of(model, images, target):
    """The cell's task loss, as benchkit computes it."""
    task = CELL["task"]
    if task == "classify":
        return F.cross_entropy(model(images), target)
    if task == "multi-label":
        return F.binary_cross_entropy_with_logits(model(images), target.to(images.dtype))
    logits = model(images, target[:, :-1])
    real = (target[:, 1:] != 0).sum().clamp(min=1)
    picked = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target[:, 1:].reshape(-1), ignore_index=0, reduction="sum")
    return picked / real


def evaluate(model, device, dtype, batch, count):
    """benchkit's evaluation after an epoch: `count` test images (the test
    split's size) in batches like `batch`, forward and task loss without
    gradients, the losses read back at the end; its seconds, the device
    synchronised. Eager, compiled or not: compiling the evaluation too would
    charge a second compile (and one more for a partial last batch) to the
    first epoch's evaluation, which burn's rows do not pay."""
    synchronize(device)
    started = time.perf_counter()
    model.eval()
    losses, done = [], 0
    with torch.no_grad():
        while done < count:
            images, target = batch
            n = min(images.shape[0], count - done)
            images = images[:n].to(device=device, dtype=dtype, non_blocking=True)
            target = target[:n].to(device=device, non_blocking=True)
            losses.append(loss_of(model, images, target).detach())
            done += n
    if losses:
        torch.stack(losses).float().mean().item()
    synchronize(device)
    model.train()
    return time.perf_counter() - started


def lr_at(step, per_epoch, total):
    """benchkit's schedule: a linear ramp from lr to the scaled rate over the
    warm-up epochs, then constant or cosine decay from the scaled rate."""
    lr, peak = CELL["lr"], CELL["peak_lr"]
    warm = round(CELL["warmup_epochs"] * per_epoch)
    if step < warm:
        return lr + (peak - lr) * step / warm
    if CELL["lr_schedule"] == "cosine":
        return 0.5 * peak * (1 + math.cos(math.pi * (step - warm) / max(total - warm, 1)))
    return peak


def percentile(sorted_values, q):
    """Linearly interpolated, as benchkit's statistics are."""
    if not sorted_values:
        return float("nan")
    pos = q * (len(sorted_values) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def plain(value):
    """`value` with every non-finite float as None: strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class OpTimer:
    """One step timed node by node, as benchkit times a burn step's ops:
    the device synchronised at every mark, each interval since the last
    mark charged to one part. A node's forward ends after its line; its
    backward starts when autograd reaches its output (a hook on that
    tensor runs just before its backward function) and lasts until the
    next node's starts. `tally` sums the parts over the timed steps."""

    def __init__(self, device, tally, by_node):
        self.device, self.tally, self.by_node = device, tally, by_node
        self.faults = tally["faults"]  # minor page faults, counted as the seconds are
        self.current = None  # the node whose backward runs; None: the loss's
        self.step = dict.fromkeys(PARTS, 0.0)
        self.took = 0
        self.hooked = {}  # id -> grad_fn, kept alive for the step so that ids are not reused
        self.last_faults = minor_faults()
        self.last = time.perf_counter()

    def _tick(self):
        synchronize(self.device)
        now, faults = time.perf_counter(), minor_faults()
        spent, self.last = now - self.last, now
        self.took, self.last_faults = faults - self.last_faults, faults
        return spent

    def part(self, name):
        spent = self._tick()
        self.tally[name] += spent
        self.faults[name] += self.took
        self.step[name] += spent

    def _charge(self, phase, nodes, i, spent):
        self.tally[nodes][i] += spent
        self.faults[nodes][i] += self.took
        self.step[phase] += spent

    def node(self, i, x):
        self._charge("forward", "node_forward", i, self._tick())
        # A node that hands on its input unchanged has no backward of its
        # own: the hook stays with the node that made the tensor.
        if isinstance(x, torch.Tensor) and x.grad_fn is not None and id(x.grad_fn) not in self.hooked:
            self.hooked[id(x.grad_fn)] = x.grad_fn
            x.register_hook(lambda grad, i=i: self._reached(i))

    def _reached(self, i):
        spent = self._tick()
        if self.current is None:
            self.tally["loss_backward"] += spent
            self.faults["loss_backward"] += self.took
            self.step["backward"] += spent
        else:
            self._charge("backward", "node_backward", self.current, spent)
        self.current = i

    def backward_done(self):
        if self.by_node:
            self._reached(None)
        else:
            self.part("backward")

    def phases(self):
        """The step's phases in benchkit's order: data wait (the caller's),
        host-to-device, forward, backward, exposed communication, optimizer, other."""
        s = self.step
        forward = s["forward"] + s["loss_forward"]
        backward = s["backward"] + s["loss_backward"]
        return [0.0, s["host_to_device"], forward, backward, 0.0, s["optimizer"], s["untagged"]]


# What an OpTimer charges outside the graph's nodes; "forward" and
# "backward" hold the whole passes where nodes are not timed one by one.
PARTS = ("host_to_device", "loss_forward", "loss_backward", "optimizer", "untagged", "forward", "backward")


def op_tally(nodes, faults=True):
    """Seconds by part and node, and the minor page faults taken in each."""
    tally = dict.fromkeys(PARTS, 0.0)
    tally["node_forward"], tally["node_backward"] = [0.0] * nodes, [0.0] * nodes
    if faults:
        tally["faults"] = op_tally(nodes, faults=False)
    return tally


def minor_faults():
    """The process's minor page faults so far: fresh pages first touched."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def check_ops(model, tally, count, device, dtype, batch):
    """The `count` slowest timed nodes that take one input, each alone on
    an input of its shape (needing its gradient where a node computes it):
    one forward and backward pass timed by torch.utils.benchmark.
    (node, median seconds, runs, page faults a run) each."""
    from torch.utils import benchmark

    spent = [f + b for f, b in zip(tally["node_forward"], tally["node_backward"])]
    graph_inputs = set(CELL["graph_inputs"])
    out = []
    for i in sorted(range(len(spent)), key=lambda i: -spent[i]):
        if len(out) == count or spent[i] <= 0:
            break
        inputs = CELL["node_inputs"][i]
        if len(inputs) != 1 or (inputs[0] in graph_inputs and inputs[0] != 0):
            continue
        j = inputs[0]
        x = torch.randn(batch, *CELL["shapes"][j], device=device, dtype=dtype, requires_grad=j not in graph_inputs)
        alone = model.ALONE[i]
        y = alone(model, x)
        if y.grad_fn is None:
            continue  # nothing to differentiate: no backward to time
        grad = torch.ones_like(y)

        def run(alone=alone, x=x, grad=grad):
            alone(model, x).backward(grad)

        timer = benchmark.Timer(stmt="run()", globals={"run": run}, num_threads=torch.get_num_threads())
        measured = timer.blocked_autorange(min_run_time=2.0)
        before = minor_faults()
        for _ in range(FAULT_RUNS):
            run()
        faults = (minor_faults() - before) / FAULT_RUNS
        out.append([i, measured.median, len(measured.times) * measured.number_per_run, faults])
    return out


# Runs after the timed ones whose page faults are counted, one by one.
FAULT_RUNS = 3


def profiled_step(index, warmup):
    """Every other measured step, from the first, as benchkit profiles them."""
    return index >= warmup and (index - warmup) % 2 == 0


def main():
    gpu = CELL["device"] == "cuda"
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=CELL["device"], help="cpu, cuda or cuda:N [%(default)s]")
    ap.add_argument("--threads", type=int, default=CELL["threads"], help="CPU threads [all cores]")
    ap.add_argument("--precision", default=CELL["precision"], choices=["f32", "bf16", "f16"])
    ap.add_argument("--timing", default=CELL["timing"], choices=["step", "epoch"])
    ap.add_argument("--epochs", type=int, default=CELL["epochs"])
    ap.add_argument("--steps", type=int, default=CELL["steps_per_epoch"], help="steps per epoch [%(default)s]")
    ap.add_argument("--warmup", type=int, default=CELL["warmup_steps"], help="first-epoch steps left out [%(default)s]")
    ap.add_argument("--test-images", type=int, default=CELL["test_images"], help="images evaluated after each epoch [%(default)s]")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (not eager)")
    ap.add_argument("--ops", action="store_true", help="time every other measured step node by node")
    ap.add_argument("--check", type=int, default=0, help="with --ops: time the N slowest nodes alone after training")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(CELL["seed"])
    device = torch.device(args.device)
    # Under torchrun: one data-parallel replica a process, as PyTorch DDP trains.
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    if world > 1:
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[args.precision]
    model = Net().to(device=device, dtype=dtype)
    params = sum(p.numel() for p in model.parameters())
    if params != CELL["params"]:
        sys.exit(f"error: the model has {params} parameters, benchkit's graph {CELL['params']}")
    trained = model
    if world > 1:
        ids = [device.index] if device.type == "cuda" else None
        trained = DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=CELL["bucket_mib"])
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=CELL["lr"],
        momentum=CELL["momentum"],
        nesterov=CELL["nesterov"],
        weight_decay=CELL["weight_decay"],
    )
    step_fn = torch.compile(trained) if args.compile else trained
    generator = torch.Generator().manual_seed(CELL["seed"] + rank)
    batches = synthetic_batches(min(args.steps, 8), CELL["batch"], generator)
    # One test batch, evaluated as often as the split's images need.
    eval_batch = synthetic_batches(1, CELL["eval_batch"], generator)[0]
    total = args.steps * args.epochs
    records = []  # (epoch, data wait s, compute s, images)
    tally = op_tally(CELL["nodes"]) if args.ops else None
    profiled = []  # (step index, its phases' seconds)
    epochs = []  # (epoch, mean training loss, seconds training, seconds evaluating)
    ends = []  # each epoch's end, Unix seconds: when its evaluation finished
    model.train()
    for epoch in range(1, args.epochs + 1):
        synchronize(device)
        losses = []
        t0 = time.perf_counter()
        started = t0
        for i in range(args.steps):
            images, target = batches[len(records) % len(batches)]
            t1 = time.perf_counter()
            timer = None
            if tally is not None and profiled_step(len(records), args.warmup):
                synchronize(device)
                timer = OpTimer(device, tally, not args.compile)
            images = images.to(device=device, dtype=dtype, non_blocking=True)
            target = target.to(device=device, non_blocking=True)
            if timer:
                timer.part("host_to_device")
            for group in optimizer.param_groups:
                group["lr"] = lr_at(len(records), args.steps, total)
            optimizer.zero_grad(set_to_none=True)
            if timer and timer.by_node:
                loss = loss_of(lambda *x: model.forward_timed(timer, *x), images, target)
                timer.part("loss_forward")
            else:
                loss = loss_of(step_fn, images, target)
                if timer:
                    timer.part("forward")
            loss.backward()
            if timer:
                timer.backward_done()
            optimizer.step()
            if timer:
                timer.part("optimizer")
            if args.timing == "step" or timer:
                synchronize(device)
            losses.append(loss.detach())
            t2 = time.perf_counter()
            if timer:
                profiled.append([len(records), timer.phases()])
            records.append([epoch, t1 - t0, t2 - t1, images.shape[0]])
            t0 = t2
        # Work still queued on the device belongs to the epoch's last step.
        queued = time.perf_counter()
        synchronize(device)
        records[-1][2] += time.perf_counter() - queued
        loss = torch.stack(losses).float().mean().item()
        train_s = time.perf_counter() - started
        epochs.append([epoch, loss, train_s, evaluate(model, device, dtype, eval_batch, args.test_images)])
        ends.append(time.time())
        print(f"epoch {epoch}: mean training loss {loss:.4f}", file=sys.stderr)

    checks = []
    if tally is not None and args.check > 0 and not args.compile:
        checks = check_ops(model, tally, args.check, device, dtype, CELL["batch"])
    timed = {i for i, _ in profiled}
    # The headline figures come from the plain steps, as benchkit's do.
    measured = [r for i, r in enumerate(records) if i >= args.warmup and i not in timed] or records[args.warmup :]
    step_ms = sorted(1e3 * (r[1] + r[2]) for r in measured)
    total_s = sum(r[1] + r[2] for r in measured)
    wait_s = sum(r[1] for r in measured)
    own = sum(r[3] for r in measured) / total_s if total_s > 0 else float("nan")
    images_per_s = own
    if world > 1:
        # Every replica's images/s, summed: the cell's total, as benchkit reports it.
        summed = torch.tensor([own], dtype=torch.float64, device=device)
        dist.all_reduce(summed)
        images_per_s = summed.item()
        dist.destroy_process_group()
        if rank != 0:
            return
    result = {
        "engine": f"pytorch {torch.__version__} {'compiled' if args.compile else 'eager'}",
        "cell": CELL["cell"],
        "device": str(device),
        "threads": torch.get_num_threads(),
        "precision": args.precision,
        "timing": args.timing,
        "params": params,
        "batch_size": CELL["batch"],
        "replicas": world,
        "bucket_mib": CELL["bucket_mib"] if world > 1 else None,
        "steps_measured": len(measured),
        "images_per_s": images_per_s,
        "images_per_s_per_replica": images_per_s / world,
        "step_ms": {q: percentile(step_ms, f) for q, f in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))},
        "data_wait_pct": 100 * wait_s / total_s if total_s > 0 else float("nan"),
        "final_loss": loss,
        # Every step (warm-up first) and epoch, for benchkit to read as its own.
        "warmup_steps": min(args.warmup, len(records)),
        "steps": records,
        "epochs": epochs,
        "epoch_end_unix_s": ends,
        "profiled": profiled,
        "ops": None if tally is None else dict(tally, by_node=not args.compile),
        "checks": checks,
    }
    if device.type == "cuda":
        result["peak_memory_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
    else:
        result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    s = result["step_ms"]
    print(
        f"{result['engine']} on {result['device']} ({result['threads']} threads, {args.precision}), "
        f"{CELL['model']}, {params:,} params, {world} replica(s) at batch {CELL['batch']}: {result['images_per_s']:.1f} img/s, "
        f"step p50 {s['p50']:.1f} ms, p90 {s['p90']:.1f} ms, p99 {s['p99']:.1f} ms over {len(measured)} steps",
        file=sys.stderr,
    )
    if gpu and device.type != "cuda":
        print("note: benchkit ran this cell on a GPU backend", file=sys.stderr)
    print(json.dumps(plain(result)))


if __name__ == "__main__":
    main()
