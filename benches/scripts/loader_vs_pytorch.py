#!/usr/bin/env python3
"""benchkit's loader against PyTorch's DataLoader on the same image folder.

Exports the shipped Fashion-MNIST subset as PNG and as JPEG files with
`benchkit data export`, then, for each format and worker count, times in
one run, one after the other:

- PyTorch: torchvision `ImageFolder` + `DataLoader` (shuffled, drop_last),
  decode with PIL, resize to 224x224 (bilinear), grey to 3 channels,
  `ToTensor`, `Normalize`;
- benchkit: `mode = "loader-only"` on the same folder, `resize = 224`,
  `channels = 3`, the optimized pipeline with the same worker count and the
  `normalize` transform plugin.

Both skip the first WARMUP batches (worker start-up) and report images/s
over the rest of one epoch. Needs `pip install torch torchvision` and a
built benchkit (`cargo build`); CI does not run it.

Usage: python3 benches/scripts/loader_vs_pytorch.py [--benchkit PATH]
       [--workers 1 2] [--batch 64] [--limit 4096]
"""

import argparse
import json
import os
import pathlib
import subprocess
import tempfile
import time

WARMUP = 5
MEAN, STD = 0.286, 0.353


def export(benchkit, repo, fmt, limit, out):
    subprocess.run(
        [benchkit, "data", "export", str(repo / "configs/data/fashion-mnist"), str(out),
         "--image-format", fmt, "--limit", str(limit)],
        check=True, stdout=subprocess.DEVNULL,
    )


def pytorch(root, workers, batch):
    import torch
    from torchvision import datasets, transforms

    tf = transforms.Compose([
        transforms.Resize((224, 224)),
        transforms.Grayscale(num_output_channels=3),
        transforms.ToTensor(),
        transforms.Normalize([MEAN] * 3, [STD] * 3),
    ])
    data = datasets.ImageFolder(root / "train", transform=tf)
    loader = torch.utils.data.DataLoader(
        data, batch_size=batch, shuffle=True, drop_last=True, num_workers=workers,
        persistent_workers=False, prefetch_factor=2 if workers > 0 else None,
    )
    images, start = 0, None
    for i, (x, _) in enumerate(loader):
        if i == WARMUP - 1:
            start = time.perf_counter()
        elif i >= WARMUP:
            images += x.shape[0]
    return images / (time.perf_counter() - start)


def benchkit_loader(benchkit, root, workers, batch, work):
    config = work / f"loader-{workers}.toml"
    config.write_text(f"""name = "loader-vs-pytorch"
mode = "loader-only"

[data]
source = "folder"
path = "{root}"
resize = 224
channels = 3
pipeline = "optimized"
workers = {workers}

[transform]
plugin = "builtin:normalize"
config = {{ mean = [{MEAN}], std = [{STD}] }}

[model]
plugin = "builtin:resnet"
config = {{ depth = 18, width = 0.125 }}

[train]
epochs = 1
batch_size = {batch}
warmup_steps = {WARMUP}
""")
    out = work / f"out-{root.name}-{workers}"
    subprocess.run([benchkit, "run", str(config), "-o", str(out), "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    cell = json.loads(next((out / "cells").glob("*.json")).read_text())
    return cell["runs"][0]["images_per_s"]


def main():
    repo = pathlib.Path(__file__).resolve().parents[2]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchkit", default=str(repo / "target/debug/benchkit"))
    parser.add_argument("--workers", type=int, nargs="+", default=[os.cpu_count() or 1])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--limit", type=int, default=4096, help="training images to export")
    args = parser.parse_args()

    print("| format | workers | PyTorch DataLoader img/s | benchkit loader-only img/s | benchkit / PyTorch |")
    print("|---|--:|--:|--:|--:|")
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        for fmt in ["png", "jpeg"]:
            root = work / fmt
            export(args.benchkit, repo, fmt, args.limit, root)
            for workers in args.workers:
                torch_ips = pytorch(root, workers, args.batch)
                ours = benchkit_loader(args.benchkit, root, workers, args.batch, work)
                print(f"| {fmt} | {workers} | {torch_ips:,.0f} | {ours:,.0f} | {ours / torch_ips:.2f}x |",
                      flush=True)


if __name__ == "__main__":
    main()
