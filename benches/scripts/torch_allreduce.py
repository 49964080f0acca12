"""PyTorch's all-reduce (torch.distributed, Gloo on the CPU), measured the way
`benchkit collective` measures one, for the two side by side in one sitting:
f32 sums from --min-bytes to --max-bytes by doubling, --warmup untimed and
--iters timed all-reduces per size after a barrier, each rank's mean time per
all-reduce averaged over the ranks (nccl-tests' default), algbw = bytes/time
and busbw = algbw * 2(n-1)/n.

    python benches/scripts/torch_allreduce.py --processes 2 --max-bytes 128M
"""

import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def parse_bytes(text):
    units = {"K": 10, "M": 20, "G": 30}
    text = text.strip().upper()
    if text[-1] in units:
        return int(text[:-1]) << units[text[-1]]
    return int(text)


def sizes(lo, hi):
    b = max(lo, 4)
    while b <= hi:
        yield b // 4 * 4
        b *= 2


def rank_main(rank, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group(args.backend, rank=rank, world_size=args.processes)
    n = args.processes
    if rank == 0:
        print(f"# all-reduce, sum of f32, {n} ranks, torch {torch.__version__} {args.backend}")
        print(f"# {'size (B)':>12}  {'time (us)':>12}  {'slowest (us)':>12}  {'algbw (GB/s)':>11}  {'busbw (GB/s)':>11}")
    for size in sizes(args.min_bytes, args.max_bytes):
        buf = torch.full((size // 4,), float(rank + 1))
        for _ in range(max(args.warmup, 1)):
            dist.all_reduce(buf)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(buf)
        seconds = (time.perf_counter() - start) / args.iters
        times = torch.zeros(n, dtype=torch.float64)
        times[rank] = seconds
        dist.all_reduce(times)
        mean, slowest = times.mean().item(), times.max().item()
        algbw = size / mean / 1e9
        busbw = algbw * 2 * (n - 1) / n
        if rank == 0:
            print(f"  {size:>12}  {mean * 1e6:>12.1f}  {slowest * 1e6:>12.1f}  {algbw:>11.4f}  {busbw:>11.4f}")
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--min-bytes", type=parse_bytes, default=8)
    p.add_argument("--max-bytes", type=parse_bytes, default=256 << 20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--backend", default="gloo")
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(rank_main, args=(args, port), nprocs=args.processes)


if __name__ == "__main__":
    main()
