#!/usr/bin/env python3
"""Write an IDX dataset (MNIST, Fashion-MNIST) as CIFAR-10 binaries.

Each 28x28 grey image is padded to 32x32 with 2 black pixels a side and
repeated over 3 channels; each record is CIFAR-10's: one label byte, then
1024 red, 1024 green, 1024 blue bytes. Training records go into
data_batch_1.bin ... data_batch_5.bin, test records into test_batch.bin,
as CIFAR-10's own files do.

    python3 scripts/cifar-from-idx.py SRC DST [--train N] [--test N]
"""
import argparse
import gzip
import os
import struct
import sys


def read_idx(directory, stem):
    for name in (stem, stem + ".gz"):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rb") as f:
                data = f.read()
            magic, = struct.unpack(">i", data[:4])
            dims = magic & 0xFF
            shape = struct.unpack(">" + "i" * dims, data[4:4 + 4 * dims])
            return shape, data[4 + 4 * dims:]
    sys.exit(f"{directory}: no {stem} or {stem}.gz")


def records(directory, prefix, limit):
    (count, height, width), pixels = read_idx(directory, f"{prefix}-images-idx3-ubyte")
    (labels_count,), labels = read_idx(directory, f"{prefix}-labels-idx1-ubyte")
    if (height, width) != (28, 28) or labels_count != count:
        sys.exit(f"{directory}: expected 28x28 images with one label each")
    side = height * width
    out = []
    for i in range(min(count, limit)):
        image = pixels[i * side:(i + 1) * side]
        plane = bytearray(1024)
        for row in range(28):
            plane[(row + 2) * 32 + 2:(row + 2) * 32 + 30] = image[row * 28:(row + 1) * 28]
        out.append(bytes([labels[i]]) + bytes(plane) * 3)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("dest")
    parser.add_argument("--train", type=int, default=60000)
    parser.add_argument("--test", type=int, default=10000)
    args = parser.parse_args()
    os.makedirs(args.dest, exist_ok=True)
    train = records(args.source, "train", args.train)
    per_file = -(-len(train) // 5)
    for k in range(5):
        with open(os.path.join(args.dest, f"data_batch_{k + 1}.bin"), "wb") as f:
            f.write(b"".join(train[k * per_file:(k + 1) * per_file]))
    with open(os.path.join(args.dest, "test_batch.bin"), "wb") as f:
        f.write(b"".join(records(args.source, "t10k", args.test)))
    print(f"{args.dest}: {len(train)} training and {min(args.test, 10000)} test images, CIFAR-10 binary")


if __name__ == "__main__":
    main()
