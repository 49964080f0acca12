#!/usr/bin/env python3
"""TFRecord and WebDataset files by the formats' own libraries, and those
libraries reading what benchkit writes.

  interop.py make OUT        write core/tests/fixtures/interop: TFRecord files
                             (plain and GZIP) by tf.io.TFRecordWriter with
                             ImageNet's tf.train.Example keys, WebDataset tar
                             shards by webdataset.ShardWriter, and
                             expected.json: every sample's label and pixels
                             as PIL decodes them
  interop.py read FORMAT DIR read the train files of a directory benchkit
                             packed (`shards pack --format FORMAT`) with
                             tf.data or webdataset's loader and print each
                             sample's label and pixel digest as JSON

Needs `pip install tensorflow-cpu webdataset pillow` (tensorflow only for
the tfrecord format). The pixel digest is the SHA-256 of the image decoded to
RGB, height x width x 3 bytes, so any reader can compute it.
"""

import glob
import hashlib
import io
import json
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

CLASSES = 5


def digest(rgb_bytes):
    return hashlib.sha256(rgb_bytes).hexdigest()


def images():
    """(encoded bytes, format, label 0-based, PIL RGB bytes, height, width) of 14 small images."""
    from PIL import Image

    out = []
    for k in range(14):
        w, h = 16 + k % 3, 12 + k % 2
        mode = "L" if k % 4 == 0 else "RGB"
        img = Image.new(mode, (w, h))
        px = img.load()
        for y in range(h):
            for x in range(w):
                v = (x * 17 + y * 29 + k * 41) % 256
                px[x, y] = v if mode == "L" else (v, (v * 3) % 256, 255 - v)
        fmt = "jpeg" if k % 5 == 4 else "png"
        buf = io.BytesIO()
        img.save(buf, format=fmt.upper(), **({"quality": 90} if fmt == "jpeg" else {}))
        data = buf.getvalue()
        rgb = Image.open(io.BytesIO(data)).convert("RGB")
        out.append((data, fmt, k % CLASSES, rgb.tobytes(), h, w))
    return out


def make(out):
    import tensorflow as tf
    import webdataset as wds

    out = pathlib.Path(out)
    samples = images()
    train, test = samples[:10], samples[10:]

    def example(data, fmt, label, h, w):
        f = tf.train.Feature
        return tf.train.Example(features=tf.train.Features(feature={
            "image/encoded": f(bytes_list=tf.train.BytesList(value=[data])),
            "image/format": f(bytes_list=tf.train.BytesList(value=[fmt.encode()])),
            "image/class/label": f(int64_list=tf.train.Int64List(value=[label + 1])),
            "image/height": f(int64_list=tf.train.Int64List(value=[h])),
            "image/width": f(int64_list=tf.train.Int64List(value=[w])),
        })).SerializeToString()

    for name, options, suffix in [("tfrecord", None, ""), ("tfrecord-gzip", "GZIP", ".gz")]:
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        for split, rows, shards in [("train", train, 2), ("validation", test, 1)]:
            for s in range(shards):
                path = d / f"{split}-{s:05d}-of-{shards:05d}{suffix}"
                with tf.io.TFRecordWriter(str(path), options=options) as w:
                    for data, fmt, label, _, h, wd in rows[s::shards]:
                        w.write(example(data, fmt, label, h, wd))
    d = out / "webdataset"
    d.mkdir(parents=True, exist_ok=True)
    for split, rows in [("train", train), ("val", test)]:
        with wds.ShardWriter(str(d / f"{split}-%06d.tar"), maxcount=6) as sink:
            for k, (data, fmt, label, _, _, _) in enumerate(rows):
                ext = "jpg" if fmt == "jpeg" else "png"
                sink.write({"__key__": f"{split}_{k:04d}", ext: data, "cls": label})

    def rows(part):
        return [{"label": label, "format": fmt, "height": h, "width": w, "sha256": digest(rgb),
                 "mean": sum(rgb) / len(rgb)} for _, fmt, label, rgb, h, w in part]

    (out / "expected.json").write_text(json.dumps({
        "made_by": f"tensorflow {tf.__version__}, webdataset {getattr(wds, '__version__', '?')}",
        "classes": CLASSES,
        "train": rows(train),
        "test": rows(test),
    }, indent=1) + "\n")


def read_tfrecord(d):
    import tensorflow as tf

    out = []
    for path in sorted(glob.glob(str(d / "train-*"))):
        compression = "GZIP" if path.endswith(".gz") else ""
        for raw in tf.data.TFRecordDataset(path, compression_type=compression):
            ex = tf.io.parse_single_example(raw, {
                "image/encoded": tf.io.FixedLenFeature([], tf.string),
                "image/class/label": tf.io.FixedLenFeature([], tf.int64),
            })
            px = tf.io.decode_image(ex["image/encoded"], channels=3, expand_animations=False)
            out.append({"label": int(ex["image/class/label"]) - 1, "sha256": digest(px.numpy().tobytes())})
    return out


def read_webdataset(d):
    import webdataset as wds

    urls = sorted(glob.glob(str(d / "train-*.tar")))
    data = wds.WebDataset(urls, shardshuffle=False).decode("rgb8").to_tuple("png;jpg;jpeg", "cls")
    return [{"label": int(cls), "sha256": digest(img.tobytes())} for img, cls in data]


def main(argv):
    if len(argv) == 3 and argv[1] == "make":
        make(argv[2])
    elif len(argv) == 4 and argv[1] == "read" and argv[2] in ("tfrecord", "webdataset"):
        d = pathlib.Path(argv[3])
        rows = read_tfrecord(d) if argv[2] == "tfrecord" else read_webdataset(d)
        print(json.dumps(rows))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
