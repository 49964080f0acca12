"""`{{name}}`: a benchkit transform plugin in Python. benchkit calls `apply`
once per batch of decoded u8 images (N×H×W×C, as `bytes`) and trains on the
f32 tensor it makes of what `apply` returns: the pixels moved to N×C×H×W,
still `bytes`, and each channel's map to f32 (value = byte × scale +
offset), which the host applies natively (the contract's byte transform,
1.1.0). This one normalises each channel and, in training, flips images at
random (seeded: same batch and seed, same output). The transform itself is
in `byte_transformer.py` (componentize-py finds an exported resource in the
module named after its interface).

Build: `sh build.sh` (componentize-py). Check: `benchkit plugin check {{name}}.wasm`."""

import json

import wit_world
from wit_world import exports
from wit_world.imports import types


class WitWorld(wit_world.WitWorld):
    def info(self) -> types.PluginInfo:
        return types.PluginInfo(
            name="{{name}}",
            version="0.1.0",
            kind=types.PluginKind.TRANSFORM,
            description="{{description}}",
            config_schema=json.dumps({
                "mean": "list of numbers, one per channel or one for all; default [0.5]",
                "std": "list of positive numbers, same rules; default [0.25]",
                "flip": "bool, default true: flip training images left to right with probability 1/2",
            }),
        )


class ByteTransformer(exports.ByteTransformer):
    pass
