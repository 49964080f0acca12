//! Graph checks: ops and attributes, references, sub-graphs, shapes.

use super::*;
use crate::plugin::{Attr, AttrValue, ImageShape, Subgraph};

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
        &[("in_channels", int(cin)), ("out_channels", int(cout)), ("kernel", int(3)), ("padding", int(1))],
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
    assert_eq!(shapes, vec![vec![3, 8, 8], vec![4, 8, 8], vec![4, 8, 8], vec![4, 4, 4], vec![64], vec![10]]);
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
    assert!(Graph::from_wit(&g, None).unwrap_err().message.contains("calls sub-graph 3, but there are 0"));
}
