//! A model plugin's graph, checked and flattened: ops parsed from their
//! names and attributes, input indices checked to point backwards,
//! sub-graph calls inlined (each call with parameters of its own) and every
//! node's output shape inferred. Any problem is a [`GraphError`] naming the
//! node. Nothing here touches burn.

use crate::plugin::text::clean_line;
use crate::plugin::{AttrValue, ModelGraph, WitNode};

/// How deep sub-graph calls may nest.
pub const MAX_DEPTH: usize = 32;
/// Nodes of the graph once every call is inlined (ViT-H/14 has about 1,500).
pub const MAX_NODES: usize = 100_000;
/// The largest integer attribute and the largest dimension of any shape.
pub const MAX_DIM: usize = 1 << 24;
/// Values in one sample's output of one node.
pub const MAX_NODE_VALUES: usize = 1 << 32;
/// Bytes in a node's full name (call prefixes included).
const MAX_NAME_BYTES: usize = 1024;

/// A graph problem, located at a node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("model graph, {location} `{name}` ({op}): {message}")]
pub struct GraphError {
    /// `node 4`, or `node 1 of sub-graph 0 "basic_64_64_s1"`.
    pub location: String,
    /// The node's full name, call prefixes included (`layer1.0.conv1`).
    pub name: String,
    pub op: String,
    pub message: String,
}

/// Operations the host implements. Shapes exclude the batch dimension: an
/// image is `[channels, height, width]`, a token sequence `[tokens, features]`,
/// a Swin feature map `[height, width, channels]`, features `[features]`.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// The image batch.
    Input,
    /// The caption token ids `[tokens]` a sequence model is fed (teacher forcing).
    Tokens,
    Conv2d {
        in_channels: usize,
        out_channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        groups: usize,
        bias: bool,
    },
    BatchNorm {
        channels: usize,
        eps: f64,
        momentum: f64,
    },
    Relu,
    Gelu,
    Tanh,
    Sigmoid,
    Dropout {
        prob: f64,
    },
    MaxPool2d {
        kernel: usize,
        stride: usize,
        padding: usize,
    },
    AvgPool2d {
        kernel: usize,
        stride: usize,
        padding: usize,
    },
    AdaptiveAvgPool2d {
        output: [usize; 2],
    },
    /// Applies to the last axis of any input.
    Linear {
        in_features: usize,
        out_features: usize,
        bias: bool,
    },
    /// Normalises the last axis.
    LayerNorm {
        features: usize,
        eps: f64,
    },
    Flatten,
    Add,
    /// Joins its inputs along `axis` (0 is the first axis after the batch).
    Concat {
        axis: usize,
    },
    Reshape {
        shape: Vec<usize>,
    },
    /// Reorders the axes after the batch.
    Permute {
        dims: Vec<usize>,
    },
    /// Multi-head scaled dot-product attention over `[tokens, dim]`: one input
    /// attends to itself, two inputs let the first attend to the second.
    Attention {
        dim: usize,
        heads: usize,
        bias: bool,
    },
    /// Non-overlapping `patch`×`patch` convolution, `[C, H, W]` to `[patches, dim]`.
    PatchEmbed {
        in_channels: usize,
        dim: usize,
        patch: usize,
    },
    /// Prepends a learned token: `[n, dim]` to `[n + 1, dim]`.
    ClassToken {
        dim: usize,
    },
    /// Adds a learned `[tokens, dim]` position embedding.
    PosEmbed {
        tokens: usize,
        dim: usize,
    },
    /// `[n, dim]` to `[dim]`: the token at `index`.
    TokenSelect {
        index: usize,
    },
    /// The mean over every axis but the last: `[..., dim]` to `[dim]`.
    TokenMean,
    /// Swin's (shifted) window attention with relative position bias on `[H, W, dim]`.
    WindowAttention {
        dim: usize,
        heads: usize,
        window: usize,
        shift: usize,
    },
    /// Swin's 2×2 neighbourhood gather: `[H, W, C]` to `[⌈H/2⌉, ⌈W/2⌉, 4C]`.
    PatchMerge,
    /// Token ids `[tokens]` to vectors `[tokens, dim]`.
    Embedding {
        vocab: usize,
        dim: usize,
    },
    /// One LSTM layer over `[tokens, input]`; optional initial hidden and cell states `[hidden]`.
    Lstm {
        input: usize,
        hidden: usize,
    },
}

/// Op names and their attributes (`name: type = default`), for errors and docs.
pub const OPS: &[(&str, &str)] = &[
    ("input", "index: int (0: the images; 1: the caption tokens of a sequence model)"),
    ("conv2d", "in_channels: int, out_channels: int, kernel: int, stride: int = 1, padding: int = 0, groups: int = 1, bias: bool = true"),
    ("batch_norm", "channels: int, eps: float = 1e-5, momentum: float = 0.1"),
    ("relu", ""),
    ("gelu", ""),
    ("tanh", ""),
    ("sigmoid", ""),
    ("dropout", "prob: float = 0.5 (active in training only)"),
    ("max_pool2d", "kernel: int, stride: int = kernel, padding: int = 0"),
    ("avg_pool2d", "kernel: int, stride: int = kernel, padding: int = 0"),
    ("adaptive_avg_pool2d", "output: ints [h, w]"),
    ("linear", "in_features: int, out_features: int, bias: bool = true (on the last axis)"),
    ("layer_norm", "features: int, eps: float = 1e-5 (on the last axis)"),
    ("flatten", ""),
    ("add", "(2 inputs of one shape)"),
    ("concat", "axis: int = 0 (2 or more inputs)"),
    ("reshape", "shape: ints (without the batch)"),
    ("permute", "dims: ints (a permutation of the axes after the batch)"),
    ("attention", "dim: int, heads: int, bias: bool = true (1 input: self-attention; 2: the first attends to the second)"),
    ("patch_embed", "in_channels: int, dim: int, patch: int"),
    ("class_token", "dim: int"),
    ("pos_embed", "tokens: int, dim: int"),
    ("token_select", "index: int = 0"),
    ("token_mean", ""),
    ("window_attention", "dim: int, heads: int, window: int, shift: int = 0 (input [H, W, dim])"),
    ("patch_merge", "(input [H, W, C])"),
    ("embedding", "vocab: int, dim: int (input: the caption tokens)"),
    ("lstm", "input: int, hidden: int (inputs: [tokens, input], then optionally h0 and c0 [hidden])"),
    ("call", "graph: int (sub-graph index)"),
];

impl Op {
    /// Trainable parameters of this op.
    pub fn num_params(&self) -> usize {
        // Saturating: a hostile graph's counts must fail the memory budget, not overflow.
        let mul = |factors: &[usize]| factors.iter().fold(1usize, |p, &f| p.saturating_mul(f));
        let linear = |i: usize, o: usize, bias: bool| mul(&[i, o]).saturating_add(if bias { o } else { 0 });
        match *self {
            Op::Conv2d { in_channels, out_channels, kernel, groups, bias, .. } => {
                mul(&[out_channels, in_channels / groups, kernel, kernel]).saturating_add(if bias {
                    out_channels
                } else {
                    0
                })
            }
            Op::BatchNorm { channels, .. } => mul(&[2, channels]),
            Op::Linear { in_features, out_features, bias } => linear(in_features, out_features, bias),
            Op::LayerNorm { features, .. } => mul(&[2, features]),
            Op::Attention { dim, bias, .. } => {
                linear(dim, mul(&[3, dim]), bias).saturating_add(linear(dim, dim, bias))
            }
            Op::PatchEmbed { in_channels, dim, patch } => {
                mul(&[dim, in_channels, patch, patch]).saturating_add(dim)
            }
            Op::ClassToken { dim } => dim,
            Op::PosEmbed { tokens, dim } => mul(&[tokens, dim]),
            Op::WindowAttention { dim, heads, window, .. } => {
                let side = mul(&[2, window]).saturating_sub(1);
                linear(dim, mul(&[3, dim]), true)
                    .saturating_add(linear(dim, dim, true))
                    .saturating_add(mul(&[side, side, heads]))
            }
            Op::Embedding { vocab, dim } => mul(&[vocab, dim]),
            Op::Lstm { input, hidden } => {
                mul(&[4, linear(input, hidden, true).saturating_add(linear(hidden, hidden, true))])
            }
            _ => 0,
        }
    }

    /// Multiply-accumulates of one sample through this op, given its first
    /// (and second) input shape and its output shape.
    fn forward_macs(&self, input: &[usize], second: Option<&[usize]>, output: &[usize]) -> u64 {
        // Saturating, like `num_params`: shapes are bounded, their products are not.
        let mul = |f: &[usize]| f.iter().fold(1u64, |p, &x| p.saturating_mul(x as u64));
        let count = |s: &[usize]| mul(s);
        let leading = |s: &[usize]| count(&s[..s.len().saturating_sub(1)]);
        match *self {
            Op::Conv2d { in_channels, kernel, groups, .. } => {
                count(output).saturating_mul(mul(&[in_channels / groups, kernel, kernel]))
            }
            Op::Linear { in_features, out_features, .. } => {
                leading(output).saturating_mul(mul(&[in_features, out_features]))
            }
            Op::PatchEmbed { in_channels, patch, .. } => {
                count(output).saturating_mul(mul(&[in_channels, patch, patch]))
            }
            Op::Attention { dim, .. } => {
                let (n, dim) = (leading(input), dim as u64);
                let m = second.map_or(n, leading);
                // query, key and value projections, scores, weighted sum, output projection
                let projections =
                    n.saturating_add(m.saturating_mul(2)).saturating_add(n).saturating_mul(dim * dim);
                projections.saturating_add(n.saturating_mul(m).saturating_mul(2 * dim))
            }
            Op::WindowAttention { dim, window, .. } => {
                let (h, w) = (input[0], input[1]);
                let win = window.min(h).min(w).max(1);
                let tokens = mul(&[h.div_ceil(win), win, w.div_ceil(win), win]);
                let dim = dim as u64;
                tokens
                    .saturating_mul(4 * dim * dim)
                    .saturating_add(tokens.saturating_mul(mul(&[2, win, win])).saturating_mul(dim))
            }
            Op::Lstm { input: i, hidden } => leading(output).saturating_mul(mul(&[4, hidden, i + hidden])),
            _ => 0,
        }
    }
}

/// One node of the flattened graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: Op,
    /// Indices of earlier nodes.
    pub inputs: Vec<usize>,
    /// Output shape without the batch dimension.
    pub shape: Vec<usize>,
}

/// A validated, flattened graph. Node 0 is the input.
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub output: usize,
}

impl Graph {
    /// Input shape `[channels, height, width]`.
    pub fn input_shape(&self) -> &[usize] {
        &self.nodes[0].shape
    }

    /// Output shape of the whole graph, without the batch dimension.
    pub fn output_shape(&self) -> &[usize] {
        &self.nodes[self.output].shape
    }

    /// Parameters the built network will have (what torchvision and timm count:
    /// no batch-norm running statistics, no fixed buffers).
    pub fn num_params(&self) -> usize {
        self.nodes.iter().fold(0usize, |sum, n| sum.saturating_add(n.op.num_params()))
    }

    /// Memory that training this graph at `batch` images per step needs, from
    /// below: weights, their gradients and optimiser momentum, and every
    /// node's output over the batch kept once for the backward pass, each
    /// value `value_bytes` wide (4 in f32, 2 in bf16 or f16; transient
    /// gradients and workspace come on top).
    pub fn memory_estimate(&self, batch: usize, value_bytes: u64) -> MemoryEstimate {
        let values = self.nodes.iter().fold(0u64, |sum, n| sum.saturating_add(node_values(n)));
        MemoryEstimate {
            parameter_bytes: (self.num_params() as u64).saturating_mul(3 * value_bytes),
            activation_bytes: values.saturating_mul(batch as u64).saturating_mul(value_bytes),
        }
    }

    /// Memory that evaluating at `batch` images needs at least: the largest
    /// node's input and output side by side, `value_bytes` a value; nothing
    /// is kept for a backward pass.
    pub fn eval_peak_bytes(&self, batch: usize, value_bytes: u64) -> u64 {
        let largest = self.nodes.iter().map(node_values).max().unwrap_or(0);
        largest.saturating_mul(batch as u64).saturating_mul(2 * value_bytes)
    }

    /// Multiply-accumulate operations of one forward pass of one sample:
    /// convolutions, linear layers, attention and recurrent matrix products.
    pub fn forward_macs(&self) -> u64 {
        self.nodes
            .iter()
            .map(|n| {
                let first = n.inputs.first().map_or(&[][..], |&i| self.nodes[i].shape.as_slice());
                let second = n.inputs.get(1).map(|&i| self.nodes[i].shape.as_slice());
                n.op.forward_macs(first, second, &n.shape)
            })
            .fold(0u64, u64::saturating_add)
    }

    /// Whether the graph reads the caption tokens (a sequence model).
    pub fn reads_tokens(&self) -> bool {
        self.nodes.get(1).is_some_and(|n| n.op == Op::Tokens)
            && self.nodes.iter().any(|m| m.inputs.contains(&1))
    }

    /// Check and flatten a plugin's graph.
    /// `tokens` is the decoder input length of caption data (`<start>` plus
    /// the longest caption), which graph argument 1 then provides.
    pub fn from_wit(g: &ModelGraph, tokens: Option<usize>) -> Result<Self, GraphError> {
        let input = vec![g.input.channels as usize, g.input.height as usize, g.input.width as usize];
        let mut flat = Flattener { g, nodes: Vec::new(), stack: Vec::new() };
        if input.contains(&0) {
            return Err(flat.error(
                &Site::main(0),
                "(graph)",
                "input",
                format!("input shape {input:?} has a zero dimension"),
            ));
        }
        flat.nodes.push(Node { name: "input".into(), op: Op::Input, inputs: Vec::new(), shape: input });
        let mut args = vec![0];
        if let Some(t) = tokens {
            flat.nodes.push(Node {
                name: "tokens".into(),
                op: Op::Tokens,
                inputs: Vec::new(),
                shape: vec![t],
            });
            args.push(1);
        }
        let output = flat.scope(&g.nodes, g.output, &args, "", None)?;
        Ok(Graph { nodes: flat.nodes, output })
    }
}

/// Values in one sample of a node's output.
fn node_values(n: &Node) -> u64 {
    n.shape.iter().fold(1u64, |p, &d| p.saturating_mul(d as u64))
}

/// What [`Graph::memory_estimate`] finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// Weights, gradients and momentum.
    pub parameter_bytes: u64,
    /// Node outputs over one batch, kept for the backward pass.
    pub activation_bytes: u64,
}

impl MemoryEstimate {
    pub fn total_bytes(&self) -> u64 {
        self.parameter_bytes.saturating_add(self.activation_bytes)
    }
}

/// Where a node sits in the plugin's graph, for error messages.
struct Site {
    index: usize,
    subgraph: Option<usize>,
}

impl Site {
    fn main(index: usize) -> Self {
        Self { index, subgraph: None }
    }
}

struct Flattener<'a> {
    g: &'a ModelGraph,
    nodes: Vec<Node>,
    /// Sub-graphs being inlined, to reject recursion.
    stack: Vec<usize>,
}

impl Flattener<'_> {
    fn error(&self, site: &Site, name: &str, op: &str, message: String) -> GraphError {
        let location = match site.subgraph {
            None => format!("node {}", site.index),
            Some(s) => format!("node {} of sub-graph {s} \"{}\"", site.index, self.g.subgraphs[s].name),
        };
        GraphError {
            location: clean_line(&location, 300),
            name: clean_line(name, 256),
            op: clean_line(op, 64),
            message: clean_line(&message, 1024),
        }
    }

    /// Inline `nodes` with `args` as its inputs; returns the flat index of `output`.
    fn scope(
        &mut self,
        nodes: &[WitNode],
        output: u32,
        args: &[usize],
        prefix: &str,
        subgraph: Option<usize>,
    ) -> Result<usize, GraphError> {
        let mut local: Vec<usize> = Vec::with_capacity(nodes.len().min(MAX_NODES));
        for (index, node) in nodes.iter().enumerate() {
            let site = Site { index, subgraph };
            let name = if prefix.len() + node.name.len() > MAX_NAME_BYTES {
                let head: String = node.name.chars().take(32).collect();
                return Err(self.error(
                    &site,
                    &format!("{head}…"),
                    &node.op,
                    format!("its full name passes {MAX_NAME_BYTES} bytes"),
                ));
            } else {
                format!("{prefix}{}", node.name)
            };
            let fail = |this: &Self, message: String| this.error(&site, &name, &node.op, message);
            if self.nodes.len() >= MAX_NODES {
                return Err(fail(
                    self,
                    format!("the graph passes {MAX_NODES} nodes once its calls are inlined"),
                ));
            }
            let mut inputs = Vec::with_capacity(node.inputs.len());
            for &i in &node.inputs {
                if i as usize >= index {
                    return Err(fail(self, format!("input {i} does not point to an earlier node")));
                }
                inputs.push(local[i as usize]);
            }
            let mut attrs = Attrs::new(&node.attrs);
            let flat = match node.op.as_str() {
                "input" => {
                    let i = attrs.int("index").map_err(|m| fail(self, m))?;
                    attrs.finish(&node.op).map_err(|m| fail(self, m))?;
                    *args.get(i).ok_or_else(|| {
                        let why = if subgraph.is_none() && i == 1 {
                            " (argument 1 is the caption tokens: a sequence model needs a captions data source)"
                        } else {
                            ""
                        };
                        fail(
                            self,
                            format!("reads argument {i}, but this graph has {} argument(s){why}", args.len()),
                        )
                    })?
                }
                "call" => {
                    let target = attrs.int("graph").map_err(|m| fail(self, m))?;
                    attrs.finish(&node.op).map_err(|m| fail(self, m))?;
                    let Some(sub) = self.g.subgraphs.get(target) else {
                        return Err(fail(
                            self,
                            format!("calls sub-graph {target}, but there are {}", self.g.subgraphs.len()),
                        ));
                    };
                    if self.stack.contains(&target) {
                        return Err(fail(self, format!("sub-graph {target} calls itself")));
                    }
                    if self.stack.len() >= MAX_DEPTH {
                        return Err(fail(self, format!("sub-graph calls nest deeper than {MAX_DEPTH}")));
                    }
                    self.stack.push(target);
                    let out =
                        self.scope(&sub.nodes, sub.output, &inputs, &format!("{name}."), Some(target))?;
                    self.stack.pop();
                    out
                }
                op => {
                    let op = parse_op(op, &mut attrs).map_err(|m| fail(self, m))?;
                    attrs.finish(&node.op).map_err(|m| fail(self, m))?;
                    let reads_tokens = inputs.iter().any(|&i| self.nodes[i].op == Op::Tokens);
                    if reads_tokens != matches!(op, Op::Embedding { .. }) {
                        let message = if reads_tokens {
                            "reads the caption tokens, which only `embedding` can take"
                        } else {
                            "takes the caption tokens (graph argument 1), not another node"
                        };
                        return Err(fail(self, message.into()));
                    }
                    let shapes: Vec<&[usize]> =
                        inputs.iter().map(|&i| self.nodes[i].shape.as_slice()).collect();
                    let shape = infer(&op, &shapes).and_then(bounded).map_err(|m| fail(self, m))?;
                    self.nodes.push(Node { name, op, inputs, shape });
                    self.nodes.len() - 1
                }
            };
            local.push(flat);
        }
        local.get(output as usize).copied().ok_or_else(|| {
            let site = Site { index: output as usize, subgraph };
            self.error(
                &site,
                "(output)",
                "output",
                format!("output is node {output}, but there are {} nodes", nodes.len()),
            )
        })
    }
}

/// Typed access to a node's attributes; remembers which were read.
struct Attrs<'a> {
    attrs: &'a [crate::plugin::Attr],
    read: Vec<&'static str>,
}

impl<'a> Attrs<'a> {
    fn new(attrs: &'a [crate::plugin::Attr]) -> Self {
        Self { attrs, read: Vec::new() }
    }

    fn get(&mut self, name: &'static str) -> Option<&'a AttrValue> {
        self.read.push(name);
        self.attrs.iter().find(|a| a.name == name).map(|a| &a.value)
    }

    fn int_opt(&mut self, name: &'static str) -> Result<Option<usize>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(AttrValue::Int(v)) if (0..=MAX_DIM as i64).contains(v) => Ok(Some(*v as usize)),
            Some(other) => {
                Err(format!("attribute `{name}` must be an int from 0 to {MAX_DIM}, got {other:?}"))
            }
        }
    }

    fn int(&mut self, name: &'static str) -> Result<usize, String> {
        self.int_opt(name)?.ok_or_else(|| format!("missing attribute `{name}`"))
    }

    fn int_or(&mut self, name: &'static str, default: usize) -> Result<usize, String> {
        Ok(self.int_opt(name)?.unwrap_or(default))
    }

    fn float_or(&mut self, name: &'static str, default: f64) -> Result<f64, String> {
        match self.get(name) {
            None => Ok(default),
            Some(AttrValue::Float(v)) if v.is_finite() => Ok(*v),
            Some(AttrValue::Int(v)) => Ok(*v as f64),
            Some(other) => Err(format!("attribute `{name}` must be a float, got {other:?}")),
        }
    }

    fn bool_or(&mut self, name: &'static str, default: bool) -> Result<bool, String> {
        match self.get(name) {
            None => Ok(default),
            Some(AttrValue::Boolean(v)) => Ok(*v),
            Some(other) => Err(format!("attribute `{name}` must be a bool, got {other:?}")),
        }
    }

    fn ints(&mut self, name: &'static str) -> Result<Vec<usize>, String> {
        match self.get(name) {
            Some(AttrValue::Ints(v))
                if v.len() <= 8 && v.iter().all(|x| (0..=MAX_DIM as i64).contains(x)) =>
            {
                Ok(v.iter().map(|x| *x as usize).collect())
            }
            None => Err(format!("missing attribute `{name}`")),
            Some(other) => Err(format!(
                "attribute `{name}` must be a list of at most 8 ints from 0 to {MAX_DIM}, got {}",
                clean_line(&format!("{other:?}"), 200)
            )),
        }
    }

    fn finish(&self, op: &str) -> Result<(), String> {
        match self.attrs.iter().find(|a| !self.read.contains(&a.name.as_str())) {
            None => Ok(()),
            Some(a) => {
                let accepted = OPS.iter().find(|(o, _)| *o == op).map(|(_, a)| *a).unwrap_or("");
                Err(format!("unknown attribute `{}`; {op} accepts: {accepted}", a.name))
            }
        }
    }
}

fn parse_op(op: &str, a: &mut Attrs) -> Result<Op, String> {
    let positive = |name: &str, v: usize| {
        if v == 0 {
            Err(format!("attribute `{name}` must be at least 1"))
        } else {
            Ok(v)
        }
    };
    let pos = |a: &mut Attrs, name: &'static str| -> Result<usize, String> { positive(name, a.int(name)?) };
    Ok(match op {
        "conv2d" => {
            let kernel = pos(a, "kernel")?;
            Op::Conv2d {
                in_channels: pos(a, "in_channels")?,
                out_channels: pos(a, "out_channels")?,
                kernel,
                stride: positive("stride", a.int_or("stride", 1)?)?,
                padding: a.int_or("padding", 0)?,
                groups: positive("groups", a.int_or("groups", 1)?)?,
                bias: a.bool_or("bias", true)?,
            }
        }
        "batch_norm" => Op::BatchNorm {
            channels: pos(a, "channels")?,
            eps: a.float_or("eps", 1e-5)?,
            momentum: a.float_or("momentum", 0.1)?,
        },
        "relu" => Op::Relu,
        "gelu" => Op::Gelu,
        "tanh" => Op::Tanh,
        "sigmoid" => Op::Sigmoid,
        "dropout" => {
            let prob = a.float_or("prob", 0.5)?;
            if !(0.0..1.0).contains(&prob) {
                return Err(format!("attribute `prob` must be in [0, 1), got {prob}"));
            }
            Op::Dropout { prob }
        }
        "max_pool2d" | "avg_pool2d" => {
            let kernel = pos(a, "kernel")?;
            let stride = positive("stride", a.int_or("stride", kernel)?)?;
            let padding = a.int_or("padding", 0)?;
            if padding * 2 > kernel {
                return Err(format!("padding {padding} is more than half the kernel {kernel}"));
            }
            if op == "max_pool2d" {
                Op::MaxPool2d { kernel, stride, padding }
            } else {
                Op::AvgPool2d { kernel, stride, padding }
            }
        }
        "adaptive_avg_pool2d" => match a.ints("output")?.as_slice() {
            [h, w] if *h > 0 && *w > 0 => Op::AdaptiveAvgPool2d { output: [*h, *w] },
            other => {
                return Err(format!("attribute `output` must be [h, w] with both at least 1, got {other:?}"))
            }
        },
        "linear" => Op::Linear {
            in_features: pos(a, "in_features")?,
            out_features: pos(a, "out_features")?,
            bias: a.bool_or("bias", true)?,
        },
        "layer_norm" => Op::LayerNorm { features: pos(a, "features")?, eps: a.float_or("eps", 1e-5)? },
        "flatten" => Op::Flatten,
        "add" => Op::Add,
        "concat" => Op::Concat { axis: a.int_or("axis", 0)? },
        "reshape" => Op::Reshape { shape: a.ints("shape")? },
        "permute" => Op::Permute { dims: a.ints("dims")? },
        "attention" | "window_attention" => {
            let dim = pos(a, "dim")?;
            let heads = pos(a, "heads")?;
            if dim % heads != 0 {
                return Err(format!("dim {dim} is not divisible by heads {heads}"));
            }
            if op == "attention" {
                Op::Attention { dim, heads, bias: a.bool_or("bias", true)? }
            } else {
                let window = pos(a, "window")?;
                let shift = a.int_or("shift", 0)?;
                if shift >= window {
                    return Err(format!("shift {shift} must be less than the window {window}"));
                }
                Op::WindowAttention { dim, heads, window, shift }
            }
        }
        "patch_embed" => Op::PatchEmbed {
            in_channels: pos(a, "in_channels")?,
            dim: pos(a, "dim")?,
            patch: pos(a, "patch")?,
        },
        "class_token" => Op::ClassToken { dim: pos(a, "dim")? },
        "pos_embed" => Op::PosEmbed { tokens: pos(a, "tokens")?, dim: pos(a, "dim")? },
        "token_select" => Op::TokenSelect { index: a.int_or("index", 0)? },
        "token_mean" => Op::TokenMean,
        "patch_merge" => Op::PatchMerge,
        "embedding" => Op::Embedding { vocab: pos(a, "vocab")?, dim: pos(a, "dim")? },
        "lstm" => Op::Lstm { input: pos(a, "input")?, hidden: pos(a, "hidden")? },
        other => {
            let known: Vec<&str> = OPS.iter().map(|(o, _)| *o).collect();
            return Err(format!("unknown op `{other}`; known ops: {}", known.join(", ")));
        }
    })
}

/// A node's output shape, if each dimension is at most [`MAX_DIM`] and
/// one sample of it at most [`MAX_NODE_VALUES`] values.
fn bounded(shape: Vec<usize>) -> Result<Vec<usize>, String> {
    match product(&shape) {
        Some(n) if n <= MAX_NODE_VALUES && shape.iter().all(|&d| d <= MAX_DIM) => Ok(shape),
        _ => Err(format!(
            "its output {shape:?} is too large: at most {MAX_DIM} per axis and {MAX_NODE_VALUES} values a sample"
        )),
    }
}

/// The product of `dims`, if it fits.
fn product(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |p, &d| p.checked_mul(d))
}

/// Output size of a sliding window, or an error when the window does not fit.
/// Inputs are bounded by [`MAX_DIM`], so the sums cannot overflow.
fn window(size: usize, kernel: usize, stride: usize, padding: usize) -> Result<usize, String> {
    if size + 2 * padding < kernel {
        return Err(format!("kernel {kernel} does not fit an input of {size} with padding {padding}"));
    }
    Ok((size + 2 * padding - kernel) / stride + 1)
}

/// Output shape of `op` for `inputs` (batch dimension excluded).
fn infer(op: &Op, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
    let arity_ok = match op {
        Op::Add => inputs.len() == 2,
        Op::Concat { .. } => inputs.len() >= 2,
        Op::Attention { .. } => (1..=2).contains(&inputs.len()),
        Op::Lstm { .. } => inputs.len() == 1 || inputs.len() == 3,
        _ => inputs.len() == 1,
    };
    if !arity_ok {
        let wanted = match op {
            Op::Add => "2",
            Op::Concat { .. } => "2 or more",
            Op::Attention { .. } => "1 or 2",
            Op::Lstm { .. } => "1 or 3",
            _ => "1",
        };
        return Err(format!("takes {wanted} input(s), got {}", inputs.len()));
    }
    let x = inputs[0];
    if x.len() > 3 {
        return Err(format!("inputs have at most 3 axes after the batch, got {x:?}"));
    }
    let image = |what: &str| -> Result<[usize; 3], String> {
        match x {
            [c, h, w] => Ok([*c, *h, *w]),
            other => Err(format!("{what} needs a [channels, height, width] input, got {other:?}")),
        }
    };
    let tokens = |what: &str, dim: usize| -> Result<usize, String> {
        match x {
            [n, d] if *d == dim => Ok(*n),
            other => Err(format!("{what} needs a [tokens, {dim}] input, got {other:?}")),
        }
    };
    let last = |what: &str, features: usize| -> Result<(), String> {
        match x.last() {
            Some(&f) if f == features => Ok(()),
            _ => Err(format!("{what} expects {features} features on the last axis, got {x:?}")),
        }
    };
    let map = |h: usize, w: usize, c: usize| -> Result<(), String> {
        match x {
            [_, _, d] if *d == c && h > 0 && w > 0 => Ok(()),
            other => Err(format!("needs a [height, width, {c}] input, got {other:?}")),
        }
    };
    Ok(match *op {
        Op::Input | Op::Tokens => x.to_vec(),
        Op::Conv2d { in_channels, out_channels, kernel, stride, padding, groups, .. } => {
            let [c, h, w] = image("conv2d")?;
            if c != in_channels {
                return Err(format!("expects {in_channels} input channels, got {c} (input shape {x:?})"));
            }
            if in_channels % groups != 0 || out_channels % groups != 0 {
                return Err(format!(
                    "channels {in_channels}->{out_channels} are not divisible by groups {groups}"
                ));
            }
            vec![out_channels, window(h, kernel, stride, padding)?, window(w, kernel, stride, padding)?]
        }
        Op::BatchNorm { channels, .. } => match x {
            [c] | [c, _, _] if *c == channels => x.to_vec(),
            _ => return Err(format!("expects {channels} channels, got input shape {x:?}")),
        },
        Op::MaxPool2d { kernel, stride, padding } | Op::AvgPool2d { kernel, stride, padding } => {
            let [c, h, w] = image("pooling")?;
            vec![c, window(h, kernel, stride, padding)?, window(w, kernel, stride, padding)?]
        }
        Op::AdaptiveAvgPool2d { output } => {
            let [c, ..] = image("adaptive_avg_pool2d")?;
            vec![c, output[0], output[1]]
        }
        Op::Relu | Op::Gelu | Op::Tanh | Op::Sigmoid | Op::Dropout { .. } => x.to_vec(),
        Op::Flatten => vec![product(x).ok_or_else(|| format!("flattening {x:?} overflows"))?],
        Op::Linear { in_features, out_features, .. } => {
            last("linear", in_features)?;
            let mut shape = x.to_vec();
            *shape.last_mut().expect("checked above") = out_features;
            shape
        }
        Op::LayerNorm { features, .. } => {
            last("layer_norm", features)?;
            x.to_vec()
        }
        Op::Add => {
            if inputs[0] != inputs[1] {
                return Err(format!("adds tensors of different shapes {:?} and {:?}", inputs[0], inputs[1]));
            }
            x.to_vec()
        }
        Op::Concat { axis } => {
            if axis >= x.len() {
                return Err(format!("axis {axis} is out of range for input shape {x:?}"));
            }
            let mut shape = x.to_vec();
            for other in &inputs[1..] {
                let fits = other.len() == x.len()
                    && other.iter().zip(x).enumerate().all(|(i, (a, b))| i == axis || a == b);
                if !fits {
                    return Err(format!("cannot join {x:?} and {other:?} along axis {axis}"));
                }
                shape[axis] = shape[axis]
                    .checked_add(other[axis])
                    .ok_or_else(|| format!("joining along axis {axis} overflows"))?;
            }
            shape
        }
        Op::Reshape { ref shape } => {
            let (from, to) = (product(x).unwrap_or(usize::MAX), product(shape).unwrap_or(0));
            if shape.is_empty() || shape.len() > 3 || from != to {
                return Err(format!(
                    "cannot reshape {x:?} ({from} values) to {shape:?} ({to} values, 1 to 3 axes)"
                ));
            }
            shape.clone()
        }
        Op::Permute { ref dims } => {
            let mut sorted = dims.clone();
            sorted.sort_unstable();
            if sorted != (0..x.len()).collect::<Vec<_>>() {
                return Err(format!("dims {dims:?} are not a permutation of the {} axes of {x:?}", x.len()));
            }
            dims.iter().map(|&d| x[d]).collect()
        }
        Op::Attention { dim, .. } => {
            let n = tokens("attention", dim)?;
            if let Some(memory) = inputs.get(1) {
                if !matches!(memory, [_, d] if *d == dim) {
                    return Err(format!("attends to a [tokens, {dim}] input, got {memory:?}"));
                }
            }
            vec![n, dim]
        }
        Op::PatchEmbed { in_channels, dim, patch } => {
            let [c, h, w] = image("patch_embed")?;
            if c != in_channels {
                return Err(format!("expects {in_channels} input channels, got {c} (input shape {x:?})"));
            }
            if h < patch || w < patch {
                return Err(format!("patch {patch} does not fit a {h}x{w} image"));
            }
            vec![(h / patch) * (w / patch), dim]
        }
        Op::ClassToken { dim } => vec![tokens("class_token", dim)? + 1, dim],
        Op::PosEmbed { tokens: n, dim } => {
            if x != [n, dim] {
                return Err(format!("holds [{n}, {dim}] positions, the input is {x:?}"));
            }
            x.to_vec()
        }
        Op::TokenSelect { index } => match x {
            [n, d] if index < *n => vec![*d],
            other => {
                return Err(format!("selects token {index} of a [tokens, features] input, got {other:?}"))
            }
        },
        Op::TokenMean => match x {
            [.., d] if x.len() >= 2 => vec![*d],
            other => return Err(format!("averages a [..., features] input of 2 or 3 axes, got {other:?}")),
        },
        Op::WindowAttention { dim, .. } => {
            map(1, 1, dim)?;
            x.to_vec()
        }
        Op::PatchMerge => match x {
            [h, w, c] => vec![h.div_ceil(2), w.div_ceil(2), 4 * c],
            other => return Err(format!("needs a [height, width, channels] input, got {other:?}")),
        },
        Op::Embedding { dim, .. } => match x {
            [t] => vec![*t, dim],
            other => return Err(format!("embeds a [tokens] input, got {other:?}")),
        },
        Op::Lstm { input, hidden } => {
            let t = tokens("lstm", input)?;
            for state in &inputs[1..] {
                if *state != [hidden] {
                    return Err(format!("initial states must be [{hidden}], got {state:?}"));
                }
            }
            vec![t, hidden]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{Attr, ImageShape, Subgraph};

    fn node(name: &str, op: &str, inputs: &[u32], attrs: &[(&str, AttrValue)]) -> WitNode {
        WitNode {
            name: name.into(),
            op: op.into(),
            inputs: inputs.to_vec(),
            attrs: attrs.iter().map(|(n, v)| Attr { name: n.to_string(), value: v.clone() }).collect(),
        }
    }

    fn int(v: i64) -> AttrValue {
        AttrValue::Int(v)
    }

    fn conv(name: &str, input: u32, cin: i64, cout: i64) -> WitNode {
        node(
            name,
            "conv2d",
            &[input],
            &[
                ("in_channels", int(cin)),
                ("out_channels", int(cout)),
                ("kernel", int(3)),
                ("padding", int(1)),
            ],
        )
    }

    fn graph(nodes: Vec<WitNode>, subgraphs: Vec<Subgraph>) -> ModelGraph {
        let output = nodes.len() as u32 - 1;
        ModelGraph { input: ImageShape { channels: 3, height: 8, width: 8 }, nodes, output, subgraphs }
    }

    fn input() -> WitNode {
        node("in", "input", &[], &[("index", int(0))])
    }

    #[test]
    fn a_small_graph_flattens_with_shapes() {
        let g = graph(
            vec![
                input(),
                conv("c", 0, 3, 4),
                node("", "relu", &[1], &[]),
                node("", "max_pool2d", &[2], &[("kernel", int(2))]),
                node("", "flatten", &[3], &[]),
                node("fc", "linear", &[4], &[("in_features", int(64)), ("out_features", int(10))]),
            ],
            vec![],
        );
        let flat = Graph::from_wit(&g, None).unwrap();
        let shapes: Vec<Vec<usize>> = flat.nodes.iter().map(|n| n.shape.clone()).collect();
        assert_eq!(
            shapes,
            vec![vec![3, 8, 8], vec![4, 8, 8], vec![4, 8, 8], vec![4, 4, 4], vec![64], vec![10]]
        );
        assert_eq!(flat.num_params(), 3 * 4 * 9 + 4 + 64 * 10 + 10);
    }

    #[test]
    fn unknown_op_names_the_node() {
        let g = graph(vec![input(), node("mystery", "swish", &[0], &[])], vec![]);
        let err = Graph::from_wit(&g, None).unwrap_err();
        assert_eq!(err.location, "node 1");
        assert_eq!(err.name, "mystery");
        assert!(err.message.starts_with("unknown op `swish`; known ops: input, conv2d"), "{err}");
    }

    #[test]
    fn forward_references_are_rejected() {
        let g = graph(vec![input(), node("", "relu", &[1], &[])], vec![]);
        let err = Graph::from_wit(&g, None).unwrap_err();
        assert!(err.message.contains("input 1 does not point to an earlier node"), "{err}");
    }

    #[test]
    fn channel_mismatch_names_the_node_and_shapes() {
        let g = graph(vec![input(), conv("stem", 0, 3, 8), conv("oops", 1, 16, 8)], vec![]);
        let err = Graph::from_wit(&g, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "model graph, node 2 `oops` (conv2d): expects 16 input channels, got 8 (input shape [8, 8, 8])"
        );
    }

    #[test]
    fn attribute_errors_list_what_is_accepted() {
        let g = graph(
            vec![input(), node("c", "conv2d", &[0], &[("in_channels", int(3)), ("kernel", int(3))])],
            vec![],
        );
        assert!(Graph::from_wit(&g, None).unwrap_err().message.contains("missing attribute `out_channels`"));
        let g = graph(vec![input(), node("", "relu", &[0], &[("alpha", AttrValue::Float(0.1))])], vec![]);
        let err = Graph::from_wit(&g, None).unwrap_err();
        assert!(err.message.contains("unknown attribute `alpha`"), "{err}");
        let g = graph(vec![input(), node("", "add", &[0], &[])], vec![]);
        assert!(Graph::from_wit(&g, None).unwrap_err().message.contains("takes 2 input(s), got 1"), "add");
    }

    #[test]
    fn subgraph_calls_inline_with_prefixed_names() {
        let block = Subgraph {
            name: "block".into(),
            nodes: vec![input(), conv("conv", 0, 3, 3), node("sum", "add", &[0, 1], &[])],
            output: 2,
        };
        let call = |name: &str, at: u32| node(name, "call", &[at], &[("graph", int(0))]);
        let g = graph(vec![input(), call("b0", 0), call("b1", 1)], vec![block]);
        let flat = Graph::from_wit(&g, None).unwrap();
        let names: Vec<&str> = flat.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["input", "b0.conv", "b0.sum", "b1.conv", "b1.sum"]);
        assert_eq!(flat.nodes.len(), 5, "two calls, each with a conv and an add");
        assert_eq!(flat.num_params(), 2 * (3 * 3 * 9 + 3), "each call has parameters of its own");
        assert_eq!(flat.nodes[3].inputs, vec![2], "b1 reads b0's output");
    }

    #[test]
    fn recursive_subgraphs_and_bad_references_are_rejected() {
        let looping = Subgraph {
            name: "me".into(),
            nodes: vec![input(), node("again", "call", &[0], &[("graph", int(0))])],
            output: 1,
        };
        let g = graph(vec![input(), node("x", "call", &[0], &[("graph", int(0))])], vec![looping]);
        let err = Graph::from_wit(&g, None).unwrap_err();
        assert!(err.message.contains("sub-graph 0 calls itself"), "{err}");
        assert!(err.location.contains("sub-graph 0 \"me\""), "{err}");
        let g = graph(vec![input(), node("x", "call", &[0], &[("graph", int(3))])], vec![]);
        assert!(Graph::from_wit(&g, None)
            .unwrap_err()
            .message
            .contains("calls sub-graph 3, but there are 0"));
    }
}
