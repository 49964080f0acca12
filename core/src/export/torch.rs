//! A flattened graph as a `torch.nn.Module`: one attribute per parametric
//! node, created in graph order (so parameters come in benchkit's order), and
//! a `forward` of one line per node that drops each value after its last use.

use super::sanitize;
use crate::model::graph::{Graph, Op};
use std::fmt::Write;

/// The `Net` class of `graph`, or what keeps it from being written.
pub fn net(graph: &Graph) -> Result<String, String> {
    let mut init = String::new();
    let mut forward = String::new();
    let mut timed = String::new();
    let mut alone = String::new();
    let mut last_reader = vec![None; graph.nodes.len()];
    for (i, node) in graph.nodes.iter().enumerate() {
        for &input in &node.inputs {
            last_reader[input] = Some(i);
        }
    }
    let mut layers = 0usize;
    for (i, node) in graph.nodes.iter().enumerate() {
        let layer = node.op.torch_layer(node.inputs.first().map(|&j| graph.nodes[j].shape.as_slice()))?;
        let name = format!("self.l{layers}");
        if let Some(layer) = &layer {
            writeln!(init, "        self.l{layers} = {layer}  # {}", sanitize(&node.name)).ok();
            layers += 1;
        }
        if matches!(node.op, Op::Input | Op::Tokens) {
            continue;
        }
        let inputs: Vec<String> = node.inputs.iter().map(|j| format!("x{j}")).collect();
        let expr = node.op.torch_expression(&name, &inputs);
        let line = format!("        x{i} = {expr}  # {}\n", sanitize(&node.name));
        let mut params: Vec<String> = Vec::new();
        for input in &inputs {
            if !params.contains(input) {
                params.push(input.clone());
            }
        }
        writeln!(alone, "        {i}: lambda self, {}: {expr},", params.join(", ")).ok();
        let mut done: Vec<usize> =
            node.inputs.iter().copied().filter(|&j| last_reader[j] == Some(i) && j != graph.output).collect();
        done.sort_unstable();
        done.dedup();
        let done: Vec<String> = done.iter().map(|j| format!("x{j}")).collect();
        let del = if done.is_empty() { String::new() } else { format!("        del {}\n", done.join(", ")) };
        forward.push_str(&line);
        forward.push_str(&del);
        timed.push_str(&line);
        writeln!(timed, "        timer.node({i}, x{i})").ok();
        timed.push_str(&del);
    }
    if layers == 0 {
        init.push_str("        pass\n");
    }
    let tokens = if graph.reads_tokens() { ", x1" } else { "" };
    let output = graph.output;
    Ok(format!(
        "class Net(nn.Module):\n    # Each node alone, on its distinct inputs in order.\n    ALONE = {{\n{alone}    }}\n\n    def __init__(self):\n        super().__init__()\n{init}\n    def forward(self, x0{tokens}):\n{forward}        return x{output}\n\n    def forward_timed(self, timer, x0{tokens}):\n        \"\"\"`forward`, each node's output handed to `timer` (an OpTimer).\"\"\"\n{timed}        return x{output}\n\n",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::graph::Node;
    use crate::model::ops::{Dense, Image, Layout, Norm, Pointwise};

    fn node(name: &str, op: Op, inputs: &[usize], shape: &[usize]) -> Node {
        Node::of(name, op, inputs, shape)
    }

    #[test]
    fn a_residual_block_keeps_its_skip_until_the_add() {
        let conv = crate::model::graph::test_conv(4, 4, 3);
        let graph = Graph {
            nodes: vec![
                node("input", Op::Input, &[], &[4, 8, 8]),
                node("conv", conv, &[0], &[4, 8, 8]),
                node(
                    "bn",
                    Op::Norm(Norm::BatchNorm { channels: 4, eps: 1e-5, momentum: 0.1 }),
                    &[1],
                    &[4, 8, 8],
                ),
                node("add", Op::Pointwise(Pointwise::Add), &[2, 0], &[4, 8, 8]),
                node("pool", Op::Image(Image::AdaptiveAvgPool2d { output: [1, 1] }), &[3], &[4, 1, 1]),
                node("flat", Op::Layout(Layout::Flatten), &[4], &[4]),
                node(
                    "fc",
                    Op::Dense(Dense::Linear { in_features: 4, out_features: 3, bias: true }),
                    &[5],
                    &[3],
                ),
            ],
            output: 6,
        };
        let code = net(&graph).unwrap();
        let expected = "class Net(nn.Module):
    # Each node alone, on its distinct inputs in order.
    ALONE = {
        1: lambda self, x0: self.l0(x0),
        2: lambda self, x1: self.l1(x1),
        3: lambda self, x2, x0: x2 + x0,
        4: lambda self, x3: F.adaptive_avg_pool2d(x3, (1, 1)),
        5: lambda self, x4: x4.flatten(1),
        6: lambda self, x5: self.l2(x5),
    }

    def __init__(self):
        super().__init__()
        self.l0 = nn.Conv2d(4, 4, 3, stride=1, padding=1, groups=1, bias=False)  # conv
        self.l1 = nn.BatchNorm2d(4, eps=1e-5, momentum=0.1)  # bn
        self.l2 = nn.Linear(4, 3, bias=True)  # fc

    def forward(self, x0):
        x1 = self.l0(x0)  # conv
        x2 = self.l1(x1)  # bn
        del x1
        x3 = x2 + x0  # add
        del x0, x2
        x4 = F.adaptive_avg_pool2d(x3, (1, 1))  # pool
        del x3
        x5 = x4.flatten(1)  # flat
        del x4
        x6 = self.l2(x5)  # fc
        del x5
        return x6

    def forward_timed(self, timer, x0):
        \"\"\"`forward`, each node's output handed to `timer` (an OpTimer).\"\"\"
        x1 = self.l0(x0)  # conv
        timer.node(1, x1)
        x2 = self.l1(x1)  # bn
        timer.node(2, x2)
        del x1
        x3 = x2 + x0  # add
        timer.node(3, x3)
        del x0, x2
        x4 = F.adaptive_avg_pool2d(x3, (1, 1))  # pool
        timer.node(4, x4)
        del x3
        x5 = x4.flatten(1)  # flat
        timer.node(5, x5)
        del x4
        x6 = self.l2(x5)  # fc
        timer.node(6, x6)
        del x5
        return x6

";
        assert_eq!(code, expected);
    }

    #[test]
    fn non_finite_attributes_are_refused() {
        assert!(Op::Pointwise(Pointwise::Dropout { prob: f64::NAN }).torch_layer(None).is_err());
        let half = Op::Pointwise(Pointwise::Dropout { prob: 0.5 }).torch_layer(None);
        assert_eq!(half, Ok(Some("nn.Dropout(0.5)".into())));
    }
}
