//! A model plugin's graph, checked and flattened: ops parsed from their
//! names and attributes, input indices checked to point backwards,
//! sub-graph calls inlined (each call with parameters of its own) and every
//! node's output shape inferred. Any problem is a [`GraphError`] naming the
//! node. Nothing here touches burn.

mod costs;
mod memory;
mod stages;
#[cfg(test)]
mod tests;

pub use super::ops::{ops, Op, MAX_DIM};
use super::ops::{product, Attrs};
pub use costs::NodeCost;
pub use memory::{MemoryEstimate, NodeShare, ReplicaMemory};
pub use stages::StagePlan;

use crate::plugin::text::clean_line;
use crate::plugin::{ModelGraph, WitNode};

/// How deep sub-graph calls may nest.
pub const MAX_DEPTH: usize = 32;
/// Nodes of the graph once every call is inlined (ViT-H/14 has about 1,500).
pub const MAX_NODES: usize = 100_000;
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

impl Node {
    /// Node `name` computing `op` on the nodes `inputs`, its output `shape`.
    pub fn of(name: &str, op: Op, inputs: &[usize], shape: &[usize]) -> Self {
        Self { name: name.into(), op, inputs: inputs.to_vec(), shape: shape.to_vec() }
    }
}

/// A square convolution without bias for tests: `in_channels` to `out_channels`, `kernel` wide, padded to keep the size.
#[cfg(test)]
pub(crate) fn test_conv(in_channels: usize, out_channels: usize, kernel: usize) -> Op {
    Op::Image(super::ops::Image::Conv2d {
        in_channels,
        out_channels,
        kernel,
        stride: 1,
        padding: kernel / 2,
        groups: 1,
        bias: false,
        dilation: 1,
    })
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

    /// Whether sub-graph `target` may be called from here: it exists, is
    /// not being inlined already, and the nesting stays bounded.
    fn check_call(&self, target: usize) -> Result<(), String> {
        if target >= self.g.subgraphs.len() {
            return Err(format!("calls sub-graph {target}, but there are {}", self.g.subgraphs.len()));
        }
        if self.stack.contains(&target) {
            return Err(format!("sub-graph {target} calls itself"));
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(format!("sub-graph calls nest deeper than {MAX_DEPTH}"));
        }
        Ok(())
    }

    /// Parse op `op` with its attributes, infer its shape and append it;
    /// only `embedding` may read the caption tokens. Its flat index.
    fn push_node(
        &mut self,
        written: &str,
        attrs: &mut Attrs,
        inputs: Vec<usize>,
        name: String,
    ) -> Result<usize, String> {
        let op = Op::parse(written, attrs)?;
        attrs.finish(written)?;
        let reads_tokens = inputs.iter().any(|&i| self.nodes[i].op == Op::Tokens);
        if reads_tokens != op.embeds_tokens() {
            return Err(if reads_tokens {
                "reads the caption tokens, which only `embedding` can take".into()
            } else {
                "takes the caption tokens (graph argument 1), not another node".into()
            });
        }
        let shapes: Vec<&[usize]> = inputs.iter().map(|&i| self.nodes[i].shape.as_slice()).collect();
        let shape = op.infer(&shapes).and_then(bounded)?;
        self.nodes.push(Node { name, op, inputs, shape });
        Ok(self.nodes.len() - 1)
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
                    self.check_call(target).map_err(|m| fail(self, m))?;
                    let g = self.g;
                    let sub = &g.subgraphs[target];
                    self.stack.push(target);
                    let out =
                        self.scope(&sub.nodes, sub.output, &inputs, &format!("{name}."), Some(target))?;
                    self.stack.pop();
                    out
                }
                op => self.push_node(op, &mut attrs, inputs, name.clone()).map_err(|m| fail(self, m))?,
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
