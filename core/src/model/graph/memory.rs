//! What training a graph holds in memory, counted from its shapes before
//! anything is allocated. Per node and sample, in values of the cell's
//! precision:
//! - **kept**: what the backward pass keeps of the node: its output when a
//!   later op's backward reads it (a convolution, linear layer, activation,
//!   pooling by maximum, attention or LSTM reads its input; a norm, a sum,
//!   a join or an average does not; the loss reads the graph's output; an
//!   op that only re-views its input, such as reshape, flatten or permute,
//!   passes the question on to its input), and the intermediates its
//!   backward reads, as the host builds each op from burn's autodiff
//!   primitives: batch norm's centred input,
//!   layer norm's centred and normalised input, dropout's mask, max
//!   pooling's indices, attention's projections and its `heads × n × m`
//!   scores three times (burn's softmax is built from primitives: the
//!   shifted scores its exponential keeps, the exponentials the division
//!   keeps, the softmax the product with the values keeps), window
//!   attention's the same per window, an LSTM's gates;
//! - **scratch**: what exists only while the node runs forward or
//!   backward: the gradients of its input and output side by side, and
//!   attention's score gradients.
//!
//! Training needs the parameters three times (weights, gradients, SGD's
//! momentum), every node's kept values over the batch, and the largest
//! node's scratch over the batch.

use super::{Graph, Node};
use crate::model::ops::values;

/// Where a process's data-parallel replicas hold their memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaMemory {
    /// In one memory, side by side (replicas on CPU cores): each its own
    /// parameters, its part of the batch beside the others'.
    Shared,
    /// Each in the memory of a device of its own (a GPU each).
    PerDevice,
}

/// What [`Graph::memory_estimate`] finds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// Weights, gradients and momentum.
    pub parameter_bytes: u64,
    /// What every node keeps over one batch for the backward pass.
    pub activation_bytes: u64,
    /// The largest node's working memory over one batch.
    pub scratch_bytes: u64,
    /// The node that holds the most (kept and working memory), and how much.
    pub largest: Option<NodeShare>,
}

/// One node's part of an estimate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeShare {
    pub index: usize,
    pub name: String,
    /// The op's name as a plugin writes it.
    pub op: String,
    pub bytes: u64,
}

impl MemoryEstimate {
    pub fn total_bytes(&self) -> u64 {
        self.parameter_bytes.saturating_add(self.activation_bytes).saturating_add(self.scratch_bytes)
    }
}

impl Graph {
    fn input_shapes(&self, n: &Node) -> (&[usize], Option<&[usize]>) {
        let first = n.inputs.first().map_or(&[][..], |&i| self.nodes[i].shape.as_slice());
        (first, n.inputs.get(1).map(|&i| self.nodes[i].shape.as_slice()))
    }

    /// Values per sample each node keeps for the backward pass: its output
    /// if a backward pass reads it, and what its own backward reads.
    pub(super) fn kept_values(&self) -> Vec<u64> {
        let mut read = vec![false; self.nodes.len()];
        read[self.output] = true;
        for (j, n) in self.nodes.iter().enumerate().rev() {
            if n.op.reads_input() || (n.op.is_view() && read[j]) {
                for &i in &n.inputs {
                    read[i] = true;
                }
            }
        }
        self.nodes
            .iter()
            .zip(read)
            .map(|(n, read)| {
                let (first, second) = self.input_shapes(n);
                let output = if read && !n.op.is_view() { values(&n.shape) } else { 0 };
                output.saturating_add(n.op.saved_values(first, second, &n.shape))
            })
            .collect()
    }

    /// Values per sample that exist only while node `n` runs: its input's
    /// and output's gradients (or, forward only, the input and output), and
    /// the op's own.
    fn scratch_values(&self, n: &Node) -> u64 {
        let (first, second) = self.input_shapes(n);
        let inputs = n.inputs.iter().map(|&i| values(&self.nodes[i].shape)).fold(0u64, u64::saturating_add);
        inputs.saturating_add(values(&n.shape)).saturating_add(n.op.extra_scratch_values(first, second))
    }

    /// Memory that training this graph at `batch` images per step needs,
    /// each value `value_bytes` wide (4 in f32, 2 in bf16 or f16).
    pub fn memory_estimate(&self, batch: usize, value_bytes: u64) -> MemoryEstimate {
        let over_batch = |v: u64| v.saturating_mul(batch as u64).saturating_mul(value_bytes);
        let (mut kept, mut scratch, mut largest) = (0u64, 0u64, None::<(usize, u64)>);
        for (i, (n, k)) in self.nodes.iter().zip(self.kept_values()).enumerate() {
            let s = self.scratch_values(n);
            kept = kept.saturating_add(k);
            scratch = scratch.max(s);
            let held = k.saturating_add(s);
            if largest.is_none_or(|(_, most)| held > most) {
                largest = Some((i, held));
            }
        }
        MemoryEstimate {
            parameter_bytes: (self.num_params() as u64).saturating_mul(3 * value_bytes),
            activation_bytes: over_batch(kept),
            scratch_bytes: over_batch(scratch),
            largest: largest.map(|(index, held)| {
                let n = &self.nodes[index];
                NodeShare { index, name: n.name.clone(), op: n.op.name().into(), bytes: over_batch(held) }
            }),
        }
    }

    /// Memory that training at a process's `batch` images per step over
    /// `replicas` data-parallel replicas needs of the memory it is checked
    /// against: the process's one memory, or one device's of `PerDevice`.
    ///
    /// Formula: shared: estimate(batch) with parameter bytes × replicas; per device:
    /// estimate(⌈batch / replicas⌉), one device's part.
    pub fn data_parallel_estimate(
        &self,
        batch: usize,
        value_bytes: u64,
        replicas: usize,
        memory: ReplicaMemory,
    ) -> MemoryEstimate {
        let replicas = replicas.max(1);
        match memory {
            ReplicaMemory::Shared => {
                let mut need = self.memory_estimate(batch, value_bytes);
                need.parameter_bytes = need.parameter_bytes.saturating_mul(replicas as u64);
                need
            }
            ReplicaMemory::PerDevice => self.memory_estimate(batch.div_ceil(replicas), value_bytes),
        }
    }

    /// Memory that evaluating at `batch` images needs at least: the
    /// parameters once, and the node that needs the most working memory,
    /// `value_bytes` a value; nothing is kept for a backward pass.
    pub fn eval_peak_bytes(&self, batch: usize, value_bytes: u64) -> u64 {
        let largest = self.nodes.iter().map(|n| self.scratch_values(n)).max().unwrap_or(0);
        let params = (self.num_params() as u64).saturating_mul(value_bytes);
        largest.saturating_mul(batch as u64).saturating_mul(value_bytes).saturating_add(params)
    }
}
