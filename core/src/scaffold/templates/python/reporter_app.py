"""`{{name}}`: a benchkit reporter plugin in Python. It receives the run's
events and returns files, which benchkit writes into the run's results
directory. This one writes `{{name}}.md`: a table of the cells with their
median images/s, step time and data wait. The reporter itself is in
`sink.py` (componentize-py finds an exported resource in the module named
after its interface).

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
            kind=types.PluginKind.REPORTER,
            description="{{description}}",
            config_schema=json.dumps({"title": "string, default the run's name: the table's heading"}),
        )


class Sink(exports.Sink):
    pass
