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
    let mut last_reader = vec![None; graph.nodes.len()];
    for (i, node) in graph.nodes.iter().enumerate() {
        for &input in &node.inputs {
            last_reader[input] = Some(i);
        }
    }
    let mut layers = 0usize;
    for (i, node) in graph.nodes.iter().enumerate() {
        let layer = layer(&node.op, node.inputs.first().map(|&j| graph.nodes[j].shape.as_slice()))?;
        let name = format!("self.l{layers}");
        if let Some(layer) = &layer {
            writeln!(init, "        self.l{layers} = {layer}  # {}", sanitize(&node.name)).ok();
            layers += 1;
        }
        if matches!(node.op, Op::Input | Op::Tokens) {
            continue;
        }
        let inputs: Vec<String> = node.inputs.iter().map(|j| format!("x{j}")).collect();
        let expr = expression(&node.op, &name, &inputs, layer.is_some());
        write!(forward, "        x{i} = {expr}  # {}", sanitize(&node.name)).ok();
        let mut done: Vec<usize> =
            node.inputs.iter().copied().filter(|&j| last_reader[j] == Some(i) && j != graph.output).collect();
        done.sort_unstable();
        done.dedup();
        let done: Vec<String> = done.iter().map(|j| format!("x{j}")).collect();
        forward.push('\n');
        if !done.is_empty() {
            writeln!(forward, "        del {}", done.join(", ")).ok();
        }
    }
    if layers == 0 {
        init.push_str("        pass\n");
    }
    let tokens = if graph.reads_tokens() { ", x1" } else { "" };
    Ok(format!(
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n{init}\n    def forward(self, x0{tokens}):\n{forward}        return x{}\n\n",
        graph.output
    ))
}

/// The Python expression of one node: `name` is its layer's attribute
/// (when `has_layer`), `inputs` its input variables.
fn expression(op: &Op, name: &str, inputs: &[String], has_layer: bool) -> String {
    let x = &inputs[0];
    match op {
        Op::PatchEmbed { .. } => format!("{name}({x}).flatten(2).transpose(1, 2)"),
        Op::Lstm { .. } => format!("lstm({name}, {})", inputs.join(", ")),
        _ if has_layer => format!("{name}({})", inputs.join(", ")),
        Op::Relu => format!("F.relu({x})"),
        Op::Gelu => format!("F.gelu({x})"),
        Op::Tanh => format!("torch.tanh({x})"),
        Op::Sigmoid => format!("torch.sigmoid({x})"),
        Op::MaxPool2d { kernel, stride, padding, ceil } => {
            let ceil = if *ceil { ", ceil_mode=True" } else { "" };
            format!("F.max_pool2d({x}, {kernel}, {stride}, {padding}{ceil})")
        }
        Op::DefaultBoxes { .. } => x.clone(),
        Op::AvgPool2d { kernel, stride, padding } => {
            format!("F.avg_pool2d({x}, {kernel}, {stride}, {padding}, count_include_pad=True)")
        }
        Op::AdaptiveAvgPool2d { output } => {
            format!("F.adaptive_avg_pool2d({x}, ({}, {}))", output[0], output[1])
        }
        Op::Flatten => format!("{x}.flatten(1)"),
        Op::Add => format!("{x} + {}", inputs[1]),
        Op::Concat { axis } => format!("torch.cat([{}], {})", inputs.join(", "), axis + 1),
        Op::Reshape { shape } => format!("{x}.reshape({x}.shape[0], {})", ints(shape)),
        Op::Permute { dims } if dims.len() < 2 => x.clone(),
        Op::Permute { dims } => {
            let moved: Vec<usize> = dims.iter().map(|d| d + 1).collect();
            format!("{x}.permute(0, {})", ints(&moved))
        }
        Op::TokenSelect { index } => format!("{x}[:, {index}]"),
        Op::TokenMean => format!("token_mean({x})"),
        Op::PatchMerge => format!("patch_merge({x})"),
        // Parametric ops took the layer arm; the inputs are never written.
        other => unreachable!("{other:?} has no expression of its own"),
    }
}

/// The `torch.nn` constructor of a parametric op; `None` for ops without parameters.
fn layer(op: &Op, input: Option<&[usize]>) -> Result<Option<String>, String> {
    let b = |v: bool| if v { "True" } else { "False" };
    Ok(Some(match *op {
        Op::Conv2d { in_channels, out_channels, kernel, stride, padding, groups, bias, dilation } => format!(
            "nn.Conv2d({in_channels}, {out_channels}, {kernel}, stride={stride}, padding={padding}, groups={groups}, bias={}{})",
            b(bias),
            if dilation == 1 { String::new() } else { format!(", dilation={dilation}") }
        ),
        Op::PatchEmbed { in_channels, dim, patch } => format!("nn.Conv2d({in_channels}, {dim}, {patch}, stride={patch})"),
        Op::BatchNorm { channels, eps, momentum } => format!(
            "nn.BatchNorm{}d({channels}, eps={}, momentum={})",
            if input.is_some_and(|shape| shape.len() == 3) { 2 } else { 1 },
            float(eps)?,
            float(momentum)?
        ),
        Op::Linear { in_features, out_features, bias } => {
            format!("nn.Linear({in_features}, {out_features}, bias={})", b(bias))
        }
        Op::LayerNorm { features, eps } => format!("nn.LayerNorm({features}, eps={})", float(eps)?),
        Op::Dropout { prob } => format!("nn.Dropout({})", float(prob)?),
        Op::Attention { dim, heads, bias } => format!("Attention({dim}, {heads}, bias={})", b(bias)),
        Op::WindowAttention { dim, heads, window, shift } => {
            let map = input.ok_or("window attention has no input")?;
            format!("WindowAttention({dim}, {heads}, {window}, {shift}, {}, {})", map[0], map[1])
        }
        Op::ClassToken { dim } => format!("ClassToken({dim})"),
        Op::PosEmbed { tokens, dim } => format!("PosEmbed({tokens}, {dim})"),
        Op::L2Norm { channels, scale } => format!("L2Norm({channels}, {})", float(scale)?),
        Op::Embedding { vocab, dim } => format!("nn.Embedding({vocab}, {dim})"),
        Op::Lstm { input, hidden } => format!("nn.LSTM({input}, {hidden}, batch_first=True)"),
        _ => return Ok(None),
    }))
}

/// A float attribute as a Python literal.
fn float(v: f64) -> Result<String, String> {
    if v.is_finite() {
        Ok(format!("{v:?}"))
    } else {
        Err(format!("attribute value {v} has no PyTorch equivalent"))
    }
}

fn ints(values: &[usize]) -> String {
    values.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::graph::Node;

    fn node(name: &str, op: Op, inputs: &[usize], shape: &[usize]) -> Node {
        Node { name: name.into(), op, inputs: inputs.to_vec(), shape: shape.to_vec() }
    }

    #[test]
    fn a_residual_block_keeps_its_skip_until_the_add() {
        let conv = Op::Conv2d {
            in_channels: 4,
            out_channels: 4,
            kernel: 3,
            stride: 1,
            padding: 1,
            groups: 1,
            bias: false,
            dilation: 1,
        };
        let graph = Graph {
            nodes: vec![
                node("input", Op::Input, &[], &[4, 8, 8]),
                node("conv", conv, &[0], &[4, 8, 8]),
                node("bn", Op::BatchNorm { channels: 4, eps: 1e-5, momentum: 0.1 }, &[1], &[4, 8, 8]),
                node("add", Op::Add, &[2, 0], &[4, 8, 8]),
                node("pool", Op::AdaptiveAvgPool2d { output: [1, 1] }, &[3], &[4, 1, 1]),
                node("flat", Op::Flatten, &[4], &[4]),
                node("fc", Op::Linear { in_features: 4, out_features: 3, bias: true }, &[5], &[3]),
            ],
            output: 6,
        };
        let code = net(&graph).unwrap();
        let expected = "class Net(nn.Module):
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

";
        assert_eq!(code, expected);
    }

    #[test]
    fn non_finite_attributes_are_refused() {
        assert!(layer(&Op::Dropout { prob: f64::NAN }, None).is_err());
        assert_eq!(float(0.5).unwrap(), "0.5");
    }
}
