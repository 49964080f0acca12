//! A builder for model graphs, so a plugin reads like the architecture it
//! defines rather than like an index table. It records nodes only; the host
//! checks shapes and builds the network.

use crate::{Attr, AttrValue, ImageShape, ModelGraph, Node, Subgraph};

/// A value produced by a node of the scope that created it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Value(u32);

/// A sub-graph registered with [`GraphBuilder::subgraph`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubgraphRef(u32);

/// Settings of a 2-D convolution; `Conv2d::new(64, 128, 3).stride(2).padding(1)`.
#[derive(Clone, Copy, Debug)]
pub struct Conv2d {
    pub in_channels: u32,
    pub out_channels: u32,
    pub kernel: u32,
    pub stride: u32,
    pub padding: u32,
    pub groups: u32,
    pub bias: bool,
    /// Spacing of the kernel's taps; above 1 for an atrous convolution.
    pub dilation: u32,
}

impl Conv2d {
    /// Stride 1, no padding, one group, no bias (the usual choice before batch-norm).
    pub fn new(in_channels: u32, out_channels: u32, kernel: u32) -> Self {
        Self { in_channels, out_channels, kernel, stride: 1, padding: 0, groups: 1, bias: false, dilation: 1 }
    }
    pub fn stride(self, stride: u32) -> Self {
        Self { stride, ..self }
    }
    pub fn padding(self, padding: u32) -> Self {
        Self { padding, ..self }
    }
    pub fn groups(self, groups: u32) -> Self {
        Self { groups, ..self }
    }
    pub fn bias(self, bias: bool) -> Self {
        Self { bias, ..self }
    }
    pub fn dilation(self, dilation: u32) -> Self {
        Self { dilation, ..self }
    }
}

fn int(name: &str, v: u32) -> Attr {
    Attr { name: name.into(), value: AttrValue::Int(v.into()) }
}

fn boolean(name: &str, v: bool) -> Attr {
    Attr { name: name.into(), value: AttrValue::Boolean(v) }
}

fn float(name: &str, v: f64) -> Attr {
    Attr { name: name.into(), value: AttrValue::Float(v) }
}

fn ints(name: &str, v: &[u32]) -> Attr {
    Attr { name: name.into(), value: AttrValue::Ints(v.iter().map(|&x| x.into()).collect()) }
}

/// An ordered list of nodes: the main graph or one sub-graph.
#[derive(Default)]
pub struct Scope {
    nodes: Vec<Node>,
}

impl Scope {
    /// Add any node; the typed methods below cover the common ops.
    pub fn node(&mut self, name: &str, op: &str, inputs: &[Value], attrs: Vec<Attr>) -> Value {
        let index = self.nodes.len() as u32;
        let name = if name.is_empty() { format!("{op}{index}") } else { name.to_string() };
        self.nodes.push(Node {
            name,
            op: op.to_string(),
            inputs: inputs.iter().map(|v| v.0).collect(),
            attrs,
        });
        Value(index)
    }

    /// Argument `index` of this scope (0 is the image batch in the main graph).
    pub fn input(&mut self, index: u32) -> Value {
        self.node(&format!("input{index}"), "input", &[], vec![int("index", index)])
    }

    pub fn conv2d(&mut self, name: &str, x: Value, c: Conv2d) -> Value {
        let attrs = vec![
            int("in_channels", c.in_channels),
            int("out_channels", c.out_channels),
            int("kernel", c.kernel),
            int("stride", c.stride),
            int("padding", c.padding),
            int("groups", c.groups),
            boolean("bias", c.bias),
        ];
        let attrs = if c.dilation == 1 { attrs } else { [attrs, vec![int("dilation", c.dilation)]].concat() };
        self.node(name, "conv2d", &[x], attrs)
    }

    pub fn batch_norm(&mut self, name: &str, x: Value, channels: u32) -> Value {
        self.node(name, "batch_norm", &[x], vec![int("channels", channels)])
    }

    pub fn relu(&mut self, x: Value) -> Value {
        self.node("", "relu", &[x], Vec::new())
    }

    pub fn max_pool2d(&mut self, x: Value, kernel: u32, stride: u32, padding: u32) -> Value {
        let attrs = vec![int("kernel", kernel), int("stride", stride), int("padding", padding)];
        self.node("", "max_pool2d", &[x], attrs)
    }

    /// Max pooling whose output size rounds up (PyTorch's `ceil_mode = True`).
    pub fn max_pool2d_ceil(&mut self, x: Value, kernel: u32, stride: u32, padding: u32) -> Value {
        let attrs = vec![
            int("kernel", kernel),
            int("stride", stride),
            int("padding", padding),
            boolean("ceil_mode", true),
        ];
        self.node("", "max_pool2d", &[x], attrs)
    }

    /// Each position's channels scaled to unit length, then by a learned
    /// per-channel weight starting at `scale`.
    pub fn l2_norm(&mut self, name: &str, x: Value, channels: u32, scale: f64) -> Value {
        self.node(name, "l2_norm", &[x], vec![int("channels", channels), float("scale", scale)])
    }

    /// Mark `x`, `[boxes, 4 + classes]`, as a detector's output over the
    /// default boxes `anchors` (centre x, centre y, width, height).
    pub fn default_boxes(&mut self, x: Value, anchors: &[[f32; 4]], classes: u32) -> Value {
        let floats = anchors.iter().flatten().map(|&v| f64::from(v)).collect();
        let attrs =
            vec![Attr { name: "anchors".into(), value: AttrValue::Floats(floats) }, int("classes", classes)];
        self.node("detections", "default_boxes", &[x], attrs)
    }

    pub fn avg_pool2d(&mut self, x: Value, kernel: u32, stride: u32, padding: u32) -> Value {
        let attrs = vec![int("kernel", kernel), int("stride", stride), int("padding", padding)];
        self.node("", "avg_pool2d", &[x], attrs)
    }

    pub fn adaptive_avg_pool2d(&mut self, x: Value, height: u32, width: u32) -> Value {
        let attrs =
            vec![Attr { name: "output".into(), value: AttrValue::Ints(vec![height.into(), width.into()]) }];
        self.node("", "adaptive_avg_pool2d", &[x], attrs)
    }

    pub fn flatten(&mut self, x: Value) -> Value {
        self.node("", "flatten", &[x], Vec::new())
    }

    pub fn linear(&mut self, name: &str, x: Value, in_features: u32, out_features: u32) -> Value {
        let attrs =
            vec![int("in_features", in_features), int("out_features", out_features), boolean("bias", true)];
        self.node(name, "linear", &[x], attrs)
    }

    /// A linear layer without bias.
    pub fn linear_no_bias(&mut self, name: &str, x: Value, in_features: u32, out_features: u32) -> Value {
        let attrs =
            vec![int("in_features", in_features), int("out_features", out_features), boolean("bias", false)];
        self.node(name, "linear", &[x], attrs)
    }

    pub fn add(&mut self, a: Value, b: Value) -> Value {
        self.node("", "add", &[a, b], Vec::new())
    }

    pub fn gelu(&mut self, x: Value) -> Value {
        self.node("", "gelu", &[x], Vec::new())
    }

    pub fn tanh(&mut self, x: Value) -> Value {
        self.node("", "tanh", &[x], Vec::new())
    }

    pub fn sigmoid(&mut self, x: Value) -> Value {
        self.node("", "sigmoid", &[x], Vec::new())
    }

    /// Zeroes each value with probability `prob` in training; the identity in evaluation.
    pub fn dropout(&mut self, x: Value, prob: f64) -> Value {
        self.node("", "dropout", &[x], vec![float("prob", prob)])
    }

    /// Layer normalisation of the last axis (`eps` 1e-5 unless set with [`Scope::node`]).
    pub fn layer_norm(&mut self, name: &str, x: Value, features: u32, eps: f64) -> Value {
        self.node(name, "layer_norm", &[x], vec![int("features", features), float("eps", eps)])
    }

    /// Join `parts` along `axis` (0 is the first axis after the batch).
    pub fn concat(&mut self, parts: &[Value], axis: u32) -> Value {
        self.node("", "concat", parts, vec![int("axis", axis)])
    }

    pub fn reshape(&mut self, x: Value, shape: &[u32]) -> Value {
        self.node("", "reshape", &[x], vec![ints("shape", shape)])
    }

    pub fn permute(&mut self, x: Value, dims: &[u32]) -> Value {
        self.node("", "permute", &[x], vec![ints("dims", dims)])
    }

    /// Multi-head self-attention over `[tokens, dim]`.
    pub fn attention(&mut self, name: &str, x: Value, dim: u32, heads: u32) -> Value {
        self.node(name, "attention", &[x], vec![int("dim", dim), int("heads", heads)])
    }

    /// Multi-head attention of `x`'s tokens over `memory`'s, both `[tokens, dim]`.
    pub fn cross_attention(&mut self, name: &str, x: Value, memory: Value, dim: u32, heads: u32) -> Value {
        self.node(name, "attention", &[x, memory], vec![int("dim", dim), int("heads", heads)])
    }

    /// A `patch`×`patch` stride-`patch` convolution with bias, as tokens `[patches, dim]`.
    pub fn patch_embed(&mut self, name: &str, x: Value, in_channels: u32, dim: u32, patch: u32) -> Value {
        let attrs = vec![int("in_channels", in_channels), int("dim", dim), int("patch", patch)];
        self.node(name, "patch_embed", &[x], attrs)
    }

    /// Prepend a learned token to `[tokens, dim]`.
    pub fn class_token(&mut self, name: &str, x: Value, dim: u32) -> Value {
        self.node(name, "class_token", &[x], vec![int("dim", dim)])
    }

    /// Add a learned `[tokens, dim]` position embedding.
    pub fn pos_embed(&mut self, name: &str, x: Value, tokens: u32, dim: u32) -> Value {
        self.node(name, "pos_embed", &[x], vec![int("tokens", tokens), int("dim", dim)])
    }

    /// The token at `index` of `[tokens, dim]`, as `[dim]`.
    pub fn token_select(&mut self, x: Value, index: u32) -> Value {
        self.node("", "token_select", &[x], vec![int("index", index)])
    }

    /// The mean over every axis but the last, as `[dim]`.
    pub fn token_mean(&mut self, x: Value) -> Value {
        self.node("", "token_mean", &[x], Vec::new())
    }

    /// Swin's (shifted) window attention with relative position bias on `[H, W, dim]`.
    pub fn window_attention(
        &mut self,
        name: &str,
        x: Value,
        dim: u32,
        heads: u32,
        window: u32,
        shift: u32,
    ) -> Value {
        let attrs = vec![int("dim", dim), int("heads", heads), int("window", window), int("shift", shift)];
        self.node(name, "window_attention", &[x], attrs)
    }

    /// Swin's 2×2 gather, `[H, W, C]` to `[H/2, W/2, 4C]`.
    pub fn patch_merge(&mut self, x: Value) -> Value {
        self.node("", "patch_merge", &[x], Vec::new())
    }

    /// Token ids (graph argument 1) to `[tokens, dim]` vectors.
    pub fn embedding(&mut self, name: &str, tokens: Value, vocab: u32, dim: u32) -> Value {
        self.node(name, "embedding", &[tokens], vec![int("vocab", vocab), int("dim", dim)])
    }

    /// One LSTM layer over `[tokens, input]`, optionally from initial hidden and cell states.
    pub fn lstm(
        &mut self,
        name: &str,
        x: Value,
        state: Option<(Value, Value)>,
        input: u32,
        hidden: u32,
    ) -> Value {
        let inputs = match state {
            Some((h, c)) => vec![x, h, c],
            None => vec![x],
        };
        self.node(name, "lstm", &inputs, vec![int("input", input), int("hidden", hidden)])
    }

    /// Run sub-graph `graph` on `inputs`; the call gets parameters of its own.
    pub fn call(&mut self, name: &str, graph: SubgraphRef, inputs: &[Value]) -> Value {
        self.node(name, "call", inputs, vec![int("graph", graph.0)])
    }
}

/// Builds a [`ModelGraph`]: a main scope plus sub-graphs shared by key.
pub struct GraphBuilder {
    input: ImageShape,
    main: Scope,
    subgraphs: Vec<Subgraph>,
    keys: Vec<String>,
}

impl GraphBuilder {
    /// A graph that consumes images of `input` shape.
    pub fn new(input: ImageShape) -> Self {
        Self { input, main: Scope::default(), subgraphs: Vec::new(), keys: Vec::new() }
    }

    /// The main graph's scope.
    pub fn main(&mut self) -> &mut Scope {
        &mut self.main
    }

    /// The sub-graph registered under `key`, defining it with `define` the
    /// first time. Blocks of the same shape share one definition.
    pub fn subgraph(&mut self, key: &str, define: impl FnOnce(&mut Scope) -> Value) -> SubgraphRef {
        if let Some(i) = self.keys.iter().position(|k| k == key) {
            return SubgraphRef(i as u32);
        }
        let mut scope = Scope::default();
        let output = define(&mut scope);
        self.subgraphs.push(Subgraph { name: key.to_string(), nodes: scope.nodes, output: output.0 });
        self.keys.push(key.to_string());
        SubgraphRef(self.subgraphs.len() as u32 - 1)
    }

    /// The finished graph, returning `output`.
    pub fn finish(self, output: Value) -> ModelGraph {
        ModelGraph { input: self.input, nodes: self.main.nodes, output: output.0, subgraphs: self.subgraphs }
    }
}
