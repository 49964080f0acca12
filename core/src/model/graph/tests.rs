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

/// A graph over a `[c, h, w]` image, its output the last node.
fn graph_on(shape: [u32; 3], nodes: Vec<WitNode>) -> Graph {
    let output = nodes.len() as u32 - 1;
    let input = ImageShape { channels: shape[0], height: shape[1], width: shape[2] };
    Graph::from_wit(&ModelGraph { input, nodes, output, subgraphs: vec![] }, None).unwrap()
}

fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.to_vec())
}

/// What the last node (the graph's output, which the loss reads) keeps.
fn last_kept(g: &Graph) -> u64 {
    *g.kept_values().last().unwrap()
}

#[test]
fn attention_keeps_its_scores_quadratic_in_the_tokens() {
    // [1, 16, 16] read as 256 tokens of 1 feature, widened to 4, attended with 2 heads.
    let at = |tokens: i64| {
        let side = (tokens as f64).sqrt() as u32;
        graph_on(
            [1, side, side],
            vec![
                input(),
                node("seq", "reshape", &[0], &[("shape", ints(&[tokens, 1]))]),
                node("wide", "linear", &[1], &[("in_features", int(1)), ("out_features", int(4))]),
                node("attn", "attention", &[2], &[("dim", int(4)), ("heads", int(2))]),
            ],
        )
    };
    let (n, d, h) = (256u64, 4u64, 2u64);
    // Output, queries + keys + values + joined heads, and the scores three times.
    assert_eq!(last_kept(&at(256)), n * d + 4 * n * d + 3 * h * n * n);
    let quadrupled = last_kept(&at(1024)) - 5 * 1024 * d;
    assert_eq!(quadrupled, 16 * 3 * h * n * n, "4× the tokens, 16× the scores");

    // 65,536 tokens of one head: 3 × 65,536² scores an image, 48 GiB in f32.
    let g = graph_on(
        [1, 256, 256],
        vec![
            input(),
            node("seq", "reshape", &[0], &[("shape", ints(&[65_536, 1]))]),
            node("attn", "attention", &[1], &[("dim", int(1)), ("heads", int(1))]),
        ],
    );
    let need = g.memory_estimate(1, 4);
    assert!(need.total_bytes() > 48 << 30, "{need:?}");
    let largest = need.largest.clone().unwrap();
    assert_eq!((largest.name.as_str(), largest.op.as_str()), ("attn", "attention"));
    assert!(need.scratch_bytes >= 2 * 65_536 * 65_536 * 4, "the score gradients: {need:?}");
}

#[test]
fn window_attention_keeps_scores_per_window_of_the_padded_map() {
    let at = |side: u32| {
        graph_on(
            [8, side, side],
            vec![
                input(),
                node("hwc", "permute", &[0], &[("dims", ints(&[1, 2, 0]))]),
                node(
                    "w",
                    "window_attention",
                    &[1],
                    &[("dim", int(8)), ("heads", int(2)), ("window", int(7))],
                ),
            ],
        )
    };
    // 14×14 is four 7×7 windows: 196 tokens, 49 keys each.
    let (t, c, h, n) = (196u64, 8u64, 2u64, 49u64);
    assert_eq!(last_kept(&at(14)), t * c + 5 * t * c + 3 * h * t * n);
    // 15×15 pads to 21×21: 441 tokens, the output stays 15×15.
    let (t, out) = (441u64, 225u64);
    assert_eq!(last_kept(&at(15)), out * c + 5 * t * c + 3 * h * t * n);
}

#[test]
fn norms_dropout_pooling_and_lstm_keep_what_their_backward_reads() {
    let x = 4 * 8 * 8;
    let one = |op: &str, attrs: &[(&str, AttrValue)]| {
        last_kept(&graph_on([4, 8, 8], vec![input(), node("n", op, &[0], attrs)]))
    };
    assert_eq!(one("batch_norm", &[("channels", int(4))]), 2 * x, "output and the centred input");
    assert_eq!(one("dropout", &[("prob", AttrValue::Float(0.5))]), 2 * x, "output and the mask");
    let dropped =
        graph_on([4, 8, 8], vec![input(), node("d", "dropout", &[0], &[]), node("r", "relu", &[1], &[])]);
    assert_eq!(dropped.kept_values()[0], 0, "dropout keeps its mask, not its input");
    assert_eq!(one("l2_norm", &[("channels", int(4))]), 2 * x, "output and the normalised input");
    assert_eq!(one("layer_norm", &[("features", int(8))]), 3 * x, "output, centred and normalised");
    assert_eq!(one("max_pool2d", &[("kernel", int(2))]), 4 * 4 * 4 * 3, "output and 64-bit indices");
    assert_eq!(one("relu", &[]), x, "an activation keeps its output alone");
    assert_eq!(one("reshape", &[("shape", ints(&[4, 64]))]), 0, "a view shares its input's memory");
    assert_eq!(one("flatten", &[]), 0);
    // Upsampling: an adaptive pool to a larger map holds the larger map.
    assert_eq!(one("adaptive_avg_pool2d", &[("output", ints(&[32, 32]))]), 4 * 32 * 32);

    let lstm = graph_on(
        [1, 6, 5],
        vec![
            input(),
            node("seq", "reshape", &[0], &[("shape", ints(&[6, 5]))]),
            node("lstm", "lstm", &[1], &[("input", int(5)), ("hidden", int(3))]),
        ],
    );
    assert_eq!(last_kept(&lstm), 6 * 3 + 6 * 11 * 3, "output, and per token the gates and states");
}

#[test]
fn the_estimate_adds_parameters_kept_values_and_the_largest_scratch() {
    let g = graph_on([3, 8, 8], vec![input(), conv("c", 0, 3, 4), node("r", "relu", &[1], &[])]);
    let params = (3 * 4 * 9 + 4) as u64;
    let kept = 3 * 64 + 4 * 64 + 4 * 64;
    // The conv reads 192 values and writes 256; the relu reads and writes 256.
    let scratch = 512;
    let need = g.memory_estimate(10, 4);
    assert_eq!(need.parameter_bytes, params * 3 * 4);
    assert_eq!(need.activation_bytes, kept * 10 * 4);
    assert_eq!(need.scratch_bytes, scratch * 10 * 4);
    assert_eq!(need.total_bytes(), (params * 3 + (kept + scratch) * 10) * 4);
    assert_eq!(need.largest.unwrap().name, "r", "the relu keeps 256 and needs 512 while it runs");
    assert_eq!(g.memory_estimate(10, 2).activation_bytes, kept * 10 * 2, "bf16 halves it");
    assert_eq!(g.eval_peak_bytes(10, 4), (512 * 10 + params) * 4);
}

/// Four replicas at batch 12: side by side, four copies of the 112
/// parameters (with gradients and momentum) beside the whole batch's
/// values; one per replica, each replica holds one copy and 3 images.
#[test]
fn replicas_side_by_side_hold_a_copy_each_and_per_device_a_part_each() {
    let g = graph_on([3, 8, 8], vec![input(), conv("c", 0, 3, 4), node("r", "relu", &[1], &[])]);
    let (params, kept, scratch) = (112u64, 704u64, 512u64);
    let shared = g.data_parallel_estimate(12, 4, 4, ReplicaMemory::Shared);
    assert_eq!(shared.parameter_bytes, 4 * params * 3 * 4);
    assert_eq!((shared.activation_bytes, shared.scratch_bytes), (kept * 12 * 4, scratch * 12 * 4));
    let each = g.data_parallel_estimate(12, 4, 4, ReplicaMemory::PerDevice);
    assert_eq!(each.total_bytes(), (params * 3 + (kept + scratch) * 3) * 4);
    assert_eq!(
        g.data_parallel_estimate(10, 4, 4, ReplicaMemory::PerDevice).activation_bytes,
        kept * 3 * 4,
        "⌈10 / 4⌉"
    );
    assert_eq!(g.data_parallel_estimate(12, 4, 1, ReplicaMemory::Shared), g.memory_estimate(12, 4));
}

/// An output is kept only while a backward pass reads it: the convolution's
/// output feeds batch norm, which keeps its centred input instead; the
/// norm's output feeds a ReLU, which reads it; a reshape passes its
/// reader on to its own input.
#[test]
fn outputs_no_backward_reads_are_not_kept() {
    let g = graph_on(
        [3, 8, 8],
        vec![
            input(),
            conv("c", 0, 3, 4),
            node("bn", "batch_norm", &[1], &[("channels", int(4))]),
            node("r", "relu", &[2], &[]),
            node("flat", "reshape", &[3], &[("shape", ints(&[256]))]),
            node("fc", "linear", &[4], &[("in_features", int(256)), ("out_features", int(10))]),
        ],
    );
    assert_eq!(g.kept_values(), vec![192, 0, 256 + 256, 256, 0, 10]);
}
