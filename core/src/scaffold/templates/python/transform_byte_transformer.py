"""The `byte-transformer` interface's `transform` resource: one per loader
thread. It only moves bytes, with slices that run in C (a channel plane is
`image[channel::channels]`); the host turns them into f32."""

import json
from typing import List

from wit_world.exports import byte_transformer as t
from wit_world.imports import types
from componentize_py_types import Err

MASK = (1 << 64) - 1


def flipped(seed: int, index: int) -> bool:
    """Whether image `index` of a batch with seed `seed` is flipped (splitmix64, as the Rust scaffold)."""
    z = (seed + (index + 1) * 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return (z ^ (z >> 31)) & 1 == 1


def per_channel(key: str, value, channels: int, positive: bool) -> List[float]:
    if not isinstance(value, list):
        raise Err(f"config key `{key}`: expected a list of numbers, got {json.dumps(value)}")
    values = value
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and (v > 0 or not positive) for v in values):
        raise Err(f"config key `{key}`: expected {'positive ' if positive else ''}numbers, got {json.dumps(value)}")
    if len(values) == 1:
        return [float(values[0])] * channels
    if len(values) == channels:
        return [float(v) for v in values]
    raise Err(f"config key `{key}`: expected 1 or {channels} values, got {len(values)}")


class Transform(t.Transform):
    def __init__(self, shape: types.ImageShape, mean: List[float], std: List[float], flip: bool) -> None:
        self.shape = shape
        self.flip = flip
        # value = byte / 255 / std - mean / std, applied by the host.
        self.scale = [1.0 / (255.0 * s) for s in std]
        self.offset = [-m / s for m, s in zip(mean, std)]

    @classmethod
    def create(cls, config: str, source: types.ImageShape, target: types.ImageShape) -> "Transform":
        given = json.loads(config) if config.strip() else {}
        unknown = sorted(set(given) - {"mean", "std", "flip"})
        if unknown:
            raise Err(f"unknown config key `{unknown[0]}`; accepted keys: flip, mean, std")
        if source.channels != target.channels:
            raise Err(f"images have {source.channels} channels but the model wants {target.channels}; "
                      "{{name}} does not convert")
        if (source.height, source.width) != (target.height, target.width):
            raise Err(f"images are {source.height}x{source.width} but the model wants "
                      f"{target.height}x{target.width}; {{name}} does not resize")
        flip = given.get("flip", True)
        if not isinstance(flip, bool):
            raise Err(f"config key `flip`: expected true or false, got {json.dumps(flip)}")
        mean = per_channel("mean", given.get("mean", [0.5]), target.channels, False)
        std = per_channel("std", given.get("std", [0.25]), target.channels, True)
        return cls(target, mean, std, flip)

    def output_shape(self) -> types.ImageShape:
        return self.shape

    def apply(self, batch: t.PixelBatch) -> t.ByteBatch:
        c, h, w = self.shape.channels, self.shape.height, self.shape.width
        size = c * h * w
        pixels = batch.pixels
        if len(pixels) != batch.count * size:
            raise Err(f"batch of {batch.count} images of {h}x{w}x{c} needs {batch.count * size} bytes, "
                      f"got {len(pixels)}")
        if batch.boxes:
            raise Err("{{name}} does not move boxes with a flip: it cannot transform detection data")
        planes: List[bytes] = []
        for i in range(batch.count):
            image = pixels[i * size:(i + 1) * size]
            flip = batch.augment and self.flip and flipped(batch.seed, i)
            for ch in range(c):
                plane = image[ch::c]
                if flip:
                    plane = b"".join(plane[y * w:(y + 1) * w][::-1] for y in range(h))
                planes.append(plane)
        return t.ByteBatch(count=batch.count, shape=self.shape, data=b"".join(planes),
                           scale=self.scale, offset=self.offset, boxes=[])
