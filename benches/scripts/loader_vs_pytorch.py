#!/usr/bin/env python3
"""benchkit's loader against PyTorch's DataLoader + PIL, per data format, at 224 px from JPEG.

Makes an ImageNet-like JPEG folder (the shipped Fashion-MNIST subset, each
image enlarged to 400x350 RGB with a class tint and sensor-like noise, saved
at quality 90: about the size and entropy of an ImageNet JPEG), packs it with
`benchkit shards pack` as TFRecord, WebDataset and benchkit shards, then, for
each format and worker count, times in one run, one after the other:

- PyTorch: DataLoader (shuffled, drop_last) over the format's usual PyTorch
  reader: torchvision `ImageFolder` for the folder (and for benchkit's own
  shards, which PyTorch cannot read: its baseline is the same JPEG files),
  the `tfrecord` package's reader for TFRecord (its files split between the
  DataLoader's workers, as webdataset splits shards, so that an epoch is
  each image once), webdataset's `WebDataset` for the tar shards; decode
  with PIL, convert to RGB, resize to 224x224, `ToTensor`, `Normalize`;
- benchkit: `mode = "loader-only"` on the same files: decode, resize to 224,
  RGB, the `normalize` transform plugin; the optimized loader with the same
  worker count.

Both skip the first WARMUP batches (worker start-up) and report images/s
over the rest of one epoch. Needs `pip install torch torchvision webdataset
tfrecord pillow` and a built benchkit (`cargo build`); CI does not run it.

Usage: python3 benches/scripts/loader_vs_pytorch.py [--benchkit PATH]
       [--workers 2] [--batch 64] [--limit 2048] [--formats tfrecord ...]
"""

import argparse
import glob
import json
import os
import pathlib
import random
import shutil
import subprocess
import tempfile
import time

WARMUP = 5
MEAN, STD = 0.45, 0.25
SIZE = (400, 350)


def imagenet_like(benchkit, repo, limit, out):
    """The Fashion-MNIST subset as 400x350 RGB JPEGs in train/<class>/ and test/<class>/."""
    from PIL import Image

    png = out.parent / "fmnist-png"
    subprocess.run([benchkit, "data", "export", str(repo / "configs/data/fashion-mnist"), str(png),
                    "--limit", str(limit)], check=True, stdout=subprocess.DEVNULL)
    rng = random.Random(0)
    noise = [Image.effect_noise(SIZE, 64).convert("L") for _ in range(8)]
    for path in sorted(png.glob("*/*/*.png")):
        split, cls = path.parts[-3], path.parts[-2]
        tint = [(int(cls) * 37) % 200 + 40, (int(cls) * 91) % 200 + 40, (int(cls) * 53) % 200 + 40]
        grey = Image.open(path).convert("L").resize(SIZE, Image.BICUBIC)
        grey = Image.blend(grey, rng.choice(noise), 0.4)
        rgb = Image.merge("RGB", [grey.point(lambda v, t=t: v * t // 255) for t in tint])
        dest = out / split / cls / (path.stem + ".jpg")
        dest.parent.mkdir(parents=True, exist_ok=True)
        rgb.save(dest, quality=90)


def pack(benchkit, root, fmt, out):
    subprocess.run([benchkit, "shards", "pack", str(root), str(out), "--format", fmt,
                    "--shard-size", "16MiB"], check=True, stdout=subprocess.DEVNULL)


def torch_transform():
    from torchvision import transforms

    return transforms.Compose([
        transforms.Resize((224, 224)),
        transforms.ToTensor(),
        transforms.Normalize([MEAN] * 3, [STD] * 3),
    ])


def tfrecord_files(files, transform):
    """The `tfrecord` package's reader over `files`, split between DataLoader
    workers as webdataset splits shards: worker k of n reads files k, k + n,
    ... in a shuffled order, through a 256-image shuffle buffer. (Its
    `MultiTFRecordDataset` has every worker read every file.)"""
    import torch

    class Files(torch.utils.data.IterableDataset):
        def __iter__(self):
            return tfrecord_worker(files, transform)

    return Files()


def tfrecord_worker(files, transform):
    """This DataLoader worker's share of `files`, decoded and shuffled."""
    import io

    import torch
    from PIL import Image
    from tfrecord.reader import tfrecord_loader

    def decode(ex):
        img = Image.open(io.BytesIO(ex["image/encoded"])).convert("RGB")
        return transform(img), int(ex["image/class/label"][0]) - 1

    info = torch.utils.data.get_worker_info()
    k, n = (info.id, info.num_workers) if info else (0, 1)
    rng = random.Random(k)
    mine = files[k::n]
    rng.shuffle(mine)
    buffer = []
    description = {"image/encoded": "byte", "image/class/label": "int"}
    for f in mine:
        for ex in tfrecord_loader(f, None, description):
            buffer.append(ex)
            if len(buffer) >= 256:
                yield decode(buffer.pop(rng.randrange(len(buffer))))
    rng.shuffle(buffer)
    yield from map(decode, buffer)


def pytorch_dataset(fmt, path):
    from torchvision import datasets

    tf = torch_transform()
    if fmt == "folder":
        return datasets.ImageFolder(path / "train", transform=tf), True
    if fmt == "tfrecord":
        return tfrecord_files(sorted(glob.glob(str(path / "train-*"))), tf), False
    import webdataset as wds

    urls = sorted(glob.glob(str(path / "train-*.tar")))
    data = (wds.WebDataset(urls, shardshuffle=len(urls), nodesplitter=None).shuffle(256)
            .decode("pil").to_tuple("jpg", "cls").map_tuple(lambda im: tf(im.convert("RGB")), int))
    return data, False


def pytorch(fmt, path, workers, batch):
    import torch

    data, shuffle = pytorch_dataset(fmt, path)
    loader = torch.utils.data.DataLoader(
        data, batch_size=batch, shuffle=shuffle, drop_last=True, num_workers=workers,
        persistent_workers=False, prefetch_factor=2 if workers > 0 else None,
    )
    images, start = 0, None
    for i, (x, _) in enumerate(loader):
        if i == WARMUP - 1:
            start = time.perf_counter()
        elif i >= WARMUP:
            images += x.shape[0]
    return images / (time.perf_counter() - start)


def benchkit_loader(benchkit, path, workers, batch, work):
    config = work / f"loader-{path.name}-{workers}.toml"
    config.write_text(f"""name = "loader-vs-pytorch"
mode = "loader-only"

[data]
path = "{path}"
num_classes = 10
resize = 224
channels = 3
pipeline = "optimized"
workers = {workers}
shuffle = 256

[transform]
plugin = "builtin:normalize"
config = {{ mean = [{MEAN}, {MEAN}, {MEAN}], std = [{STD}, {STD}, {STD}] }}

[model]
plugin = "builtin:resnet"
config = {{ depth = 18, width = 0.125 }}

[train]
epochs = 1
batch_size = {batch}
warmup_steps = {WARMUP}
""")
    out = work / f"out-{path.name}-{workers}"
    shutil.rmtree(out, ignore_errors=True)
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
    parser.add_argument("--limit", type=int, default=2048, help="training images per split")
    parser.add_argument("--work", help="keep the data here and reuse it on the next run")
    parser.add_argument("--formats", nargs="+", default=["folder", "tfrecord", "webdataset", "bkshard"])
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(args.work or tmp)
        folder = work / "folder"
        if not folder.is_dir():
            imagenet_like(args.benchkit, repo, args.limit, folder)
        jpegs = sorted(folder.glob("train/*/*.jpg"))
        mean_kb = sum(p.stat().st_size for p in jpegs) / len(jpegs) / 1024
        print(f"{len(jpegs)} training JPEGs, {SIZE[0]}x{SIZE[1]}, {mean_kb:.0f} kB on average")
        paths = {"folder": folder}
        for fmt in ["tfrecord", "webdataset", "bkshard"]:
            paths[fmt] = work / fmt
            if not paths[fmt].is_dir():
                pack(args.benchkit, folder, fmt, paths[fmt])
        print("| format | PyTorch reader | workers | PyTorch img/s | benchkit img/s | benchkit / PyTorch |")
        print("|---|---|--:|--:|--:|--:|")
        readers = {"folder": "ImageFolder", "tfrecord": "tfrecord reader, files split by worker",
                   "webdataset": "webdataset.WebDataset", "bkshard": "ImageFolder (same JPEGs)"}
        for fmt, path in paths.items():
            if fmt not in args.formats:
                continue
            for workers in args.workers:
                torch_ips = (pytorch("folder", folder, workers, args.batch) if fmt == "bkshard"
                             else pytorch(fmt, path, workers, args.batch))
                ours = benchkit_loader(args.benchkit, path, workers, args.batch, work)
                print(f"| {fmt} | {readers[fmt]} | {workers} | {torch_ips:,.0f} | {ours:,.0f} "
                      f"| {ours / torch_ips:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
