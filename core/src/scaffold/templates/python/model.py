"""`{{name}}`: a benchkit model plugin in Python. It describes a graph;
benchkit builds and trains it natively. `benchkit ops` lists the ops a graph
may use and their attributes.

Build: `sh build.sh` (componentize-py). Check: `benchkit plugin check {{name}}.wasm`."""

import json
from typing import Dict, List, Union

import wit_world
from wit_world import exports
from wit_world.exports import describer as d
from wit_world.imports import types
from componentize_py_types import Err

Attr = Union[int, float, bool, str, List[int]]


class Graph:
    """A flat list of nodes; each op returns the index of the node it added."""

    def __init__(self) -> None:
        self.nodes: List[d.Node] = []

    def node(self, op: str, inputs: List[int], name: str = "", **attrs: Attr) -> int:
        index = len(self.nodes)
        self.nodes.append(d.Node(name=name or f"{op}{index}", op=op, inputs=inputs,
                                 attrs=[d.Attr(name=k, value=attr(v)) for k, v in attrs.items()]))
        return index

    def conv2d(self, name: str, x: int, cin: int, cout: int, kernel: int, padding: int = 0) -> int:
        return self.node("conv2d", [x], name, in_channels=cin, out_channels=cout, kernel=kernel,
                         stride=1, padding=padding, groups=1, bias=False)

    def finish(self, shape: types.ImageShape, output: int) -> d.ModelGraph:
        return d.ModelGraph(input=shape, nodes=self.nodes, output=output, subgraphs=[])


def attr(value: Attr) -> d.AttrValue:
    if isinstance(value, bool):
        return d.AttrValue_Boolean(value)
    if isinstance(value, int):
        return d.AttrValue_Int(value)
    if isinstance(value, float):
        return d.AttrValue_Float(value)
    if isinstance(value, str):
        return d.AttrValue_Text(value)
    return d.AttrValue_Ints(list(value))


def settings(config: str, defaults: Dict[str, int]) -> Dict[str, int]:
    """The user's config over `defaults`: unknown keys and wrong types refused."""
    given = json.loads(config) if config.strip() else {}
    for key, value in given.items():
        if key not in defaults:
            raise Err(f"unknown config key `{key}`; accepted keys: {', '.join(sorted(defaults))}")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise Err(f"config key `{key}`: expected a positive integer, got {json.dumps(value)}")
    return {**defaults, **given}


class WitWorld(wit_world.WitWorld):
    def info(self) -> types.PluginInfo:
        return types.PluginInfo(
            name="{{name}}",
            version="0.1.0",
            kind=types.PluginKind.MODEL,
            description="{{description}}",
            config_schema=json.dumps({
                "width": "integer, default 32: channels of the first convolution (the second has twice as many)",
                "num_classes": "integer, default the data's classes",
                "in_channels": "integer, default the data's channels",
            }),
        )


class Describer(exports.Describer):
    def describe(self, config: str, spec: d.InputSpec) -> d.ModelGraph:
        s = settings(config, {"width": 32, "num_classes": spec.num_classes,
                              "in_channels": spec.shape.channels})
        width, classes, channels = s["width"], s["num_classes"], s["in_channels"]
        shape = types.ImageShape(channels=channels, height=spec.shape.height, width=spec.shape.width)
        g = Graph()
        x = g.node("input", [], "input0", index=0)
        x = g.conv2d("conv1", x, channels, width, 3, padding=1)
        x = g.node("batch_norm", [x], "bn1", channels=width)
        x = g.node("relu", [x])
        x = g.node("max_pool2d", [x], kernel=2, stride=2, padding=0)
        x = g.conv2d("conv2", x, width, 2 * width, 3, padding=1)
        x = g.node("batch_norm", [x], "bn2", channels=2 * width)
        x = g.node("relu", [x])
        x = g.node("adaptive_avg_pool2d", [x], output=[1, 1])
        x = g.node("flatten", [x])
        x = g.node("linear", [x], "fc", in_features=2 * width, out_features=classes, bias=True)
        return g.finish(shape, x)
