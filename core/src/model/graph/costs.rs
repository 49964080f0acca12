//! What each node of a graph costs one training step, counted from its
//! shapes: multiply-accumulates, and the least bytes the node must read and
//! write, forward and backward, for the op tables' achieved GFLOP/s and GB/s.

use super::{Graph, Op};
use crate::model::ops::values;

/// One node's work in a training step over a whole batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeCost {
    pub macs: u64,
    pub bytes: u64,
}

impl Graph {
    /// Each node's cost in a step of `batch` samples, values `value_bytes` wide.
    ///
    /// The backward pass repeats the forward's products once for the input's
    /// gradient (where an input is computed, not the graph's own) and once
    /// for the parameters' (where the op has any). Forward, a node reads its
    /// inputs and parameters and writes its output; backward, it reads its
    /// output's gradient, its saved inputs and its parameters, and writes its
    /// computed inputs' gradients and its parameters'. An op that only
    /// re-views its input moves nothing.
    ///
    /// Formula: node macs = batch × forward MACs × ([an input is computed] + [the op has parameters] + 1).
    /// Formula: node bytes = value bytes × (batch × (2 × Σ inputs + 2 × output + Σ computed inputs) + 3 × params).
    pub fn step_costs(&self, batch: usize, value_bytes: usize) -> Vec<NodeCost> {
        let batch = batch as u64;
        let width = value_bytes as u64;
        self.nodes
            .iter()
            .map(|n| {
                if matches!(n.op, Op::Input | Op::Tokens) {
                    return NodeCost { macs: 0, bytes: 0 };
                }
                let shape = |i: usize| self.nodes[i].shape.as_slice();
                let first = n.inputs.first().map_or(&[][..], |&i| shape(i));
                let second = n.inputs.get(1).map(|&i| shape(i));
                let computed = |i: &usize| !matches!(self.nodes[*i].op, Op::Input | Op::Tokens);
                let params = n.op.num_params() as u64;
                let passes = 1 + u64::from(n.inputs.iter().any(computed)) + u64::from(params > 0);
                let macs =
                    batch.saturating_mul(n.op.forward_macs(first, second, &n.shape)).saturating_mul(passes);
                if n.op.is_view() {
                    return NodeCost { macs, bytes: 0 };
                }
                let inputs: u64 = n.inputs.iter().map(|&i| values(shape(i))).sum();
                let grads: u64 = n.inputs.iter().filter(|i| computed(i)).map(|&i| values(shape(i))).sum();
                let per_sample = 2 * inputs + 2 * values(&n.shape) + grads;
                let bytes = width.saturating_mul(batch.saturating_mul(per_sample).saturating_add(3 * params));
                NodeCost { macs, bytes }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::graph::Node;
    use crate::model::ops::{Dense, Layout, Pointwise};

    fn node(name: &str, op: Op, inputs: &[usize], shape: &[usize]) -> Node {
        Node::of(name, op, inputs, shape)
    }

    #[test]
    fn costs_are_counted_by_hand() {
        let conv = crate::model::graph::test_conv(1, 2, 3);
        let graph = Graph {
            nodes: vec![
                node("input", Op::Input, &[], &[1, 4, 4]),
                node("conv", conv, &[0], &[2, 4, 4]),
                node("relu", Op::Pointwise(Pointwise::Relu), &[1], &[2, 4, 4]),
                node("flat", Op::Layout(Layout::Flatten), &[2], &[32]),
                node(
                    "fc",
                    Op::Dense(Dense::Linear { in_features: 32, out_features: 3, bias: false }),
                    &[3],
                    &[3],
                ),
            ],
            output: 4,
        };
        let c = graph.step_costs(2, 4);
        // conv: 2 × 4 × 4 outputs × 9 taps = 288 MACs a sample; the image needs
        // no gradient, the weights do: 2 passes × 2 samples = 1152.
        // Bytes: 4 × (2 × (2 × 16 + 2 × 32 + 0) + 3 × 18) = 4 × 246 = 984.
        assert_eq!(c[1], NodeCost { macs: 1152, bytes: 984 });
        // relu: no products; 4 × 2 × (2 × 32 + 2 × 32 + 32) = 1280 bytes.
        assert_eq!(c[2], NodeCost { macs: 0, bytes: 1280 });
        // flatten is a view.
        assert_eq!(c[3], NodeCost { macs: 0, bytes: 0 });
        // fc: 96 MACs a sample, 3 passes, 2 samples = 576;
        // 4 × (2 × (64 + 6 + 32) + 3 × 96) = 4 × 492 = 1968.
        assert_eq!(c[4], NodeCost { macs: 576, bytes: 1968 });
    }
}
