// `{{name}}`: a benchkit model plugin in JavaScript. It describes a graph;
// benchkit builds and trains it natively. `benchkit ops` lists the ops a graph
// may use and their attributes.
//
// Build: `npm install && npm run build`. Check: `benchkit plugin check {{name}}.wasm`.

/** An attribute value as the contract's `attr-value` variant (s64 is a BigInt). */
function attr(value) {
  if (typeof value === "boolean") return { tag: "boolean", val: value };
  if (typeof value === "string") return { tag: "text", val: value };
  if (Array.isArray(value)) return { tag: "ints", val: value.map((v) => BigInt(v)) };
  if (Number.isInteger(value)) return { tag: "int", val: BigInt(value) };
  return { tag: "float", val: value };
}

/** A flat list of nodes; each op returns the index of the node it added. */
class Graph {
  constructor() {
    this.nodes = [];
  }

  node(op, inputs, name = "", attrs = {}) {
    const index = this.nodes.length;
    this.nodes.push({
      name: name || `${op}${index}`,
      op,
      inputs,
      attrs: Object.entries(attrs).map(([key, value]) => ({ name: key, value: attr(value) })),
    });
    return index;
  }

  conv2d(name, x, cin, cout, kernel, padding) {
    return this.node("conv2d", [x], name, {
      in_channels: cin, out_channels: cout, kernel, stride: 1, padding, groups: 1, bias: false,
    });
  }
}

/** The user's config over `defaults`: unknown keys and wrong types refused. */
function settings(config, defaults) {
  const given = config.trim() === "" ? {} : JSON.parse(config);
  for (const [key, value] of Object.entries(given)) {
    if (!(key in defaults)) {
      throw `unknown config key \`${key}\`; accepted keys: ${Object.keys(defaults).sort().join(", ")}`;
    }
    if (!Number.isInteger(value) || value < 1) {
      throw `config key \`${key}\`: expected a positive integer, got ${JSON.stringify(value)}`;
    }
  }
  return { ...defaults, ...given };
}

export function info() {
  return {
    name: "{{name}}",
    version: "0.1.0",
    kind: "model",
    description: "{{description}}",
    configSchema: JSON.stringify({
      width: "integer, default 32: channels of the first convolution (the second has twice as many)",
      num_classes: "integer, default the data's classes",
      in_channels: "integer, default the data's channels",
    }),
  };
}

export const describer = {
  describe(config, spec) {
    const s = settings(config, { width: 32, num_classes: spec.numClasses, in_channels: spec.shape.channels });
    const [width, classes, channels] = [s.width, s.num_classes, s.in_channels];
    const g = new Graph();
    let x = g.node("input", [], "input0", { index: 0 });
    x = g.conv2d("conv1", x, channels, width, 3, 1);
    x = g.node("batch_norm", [x], "bn1", { channels: width });
    x = g.node("relu", [x]);
    x = g.node("max_pool2d", [x], "", { kernel: 2, stride: 2, padding: 0 });
    x = g.conv2d("conv2", x, width, 2 * width, 3, 1);
    x = g.node("batch_norm", [x], "bn2", { channels: 2 * width });
    x = g.node("relu", [x]);
    x = g.node("adaptive_avg_pool2d", [x], "", { output: [1, 1] });
    x = g.node("flatten", [x]);
    x = g.node("linear", [x], "fc", { in_features: 2 * width, out_features: classes, bias: true });
    return {
      input: { channels, height: spec.shape.height, width: spec.shape.width },
      nodes: g.nodes,
      output: x,
      subgraphs: [],
    };
  },
};
