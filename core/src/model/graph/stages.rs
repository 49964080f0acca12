//! A graph cut into pipeline stages: contiguous runs of nodes, each cut
//! carrying the values that nodes after it read (one feature map for a cut
//! between residual blocks; the caption tokens too in a sequence model), and
//! an automatic balance by estimated cost.

use super::{Graph, Op};
use crate::model::ops::values;
use std::ops::Range;

/// Where a graph's stages start and end, and what crosses each cut.
#[derive(Clone, Debug, PartialEq)]
pub struct StagePlan {
    /// Each stage's nodes, in order; together every node after the inputs.
    pub ranges: Vec<Range<usize>>,
    /// Per stage, the values it hands on, by node: those read after its
    /// last node (the last stage hands on the graph's output alone).
    pub carried: Vec<Vec<usize>>,
    /// Per stage, its share of the estimated forward cost.
    pub cost_share: Vec<f64>,
}

impl Graph {
    /// The first node that computes: after the image input and, in a
    /// sequence model, the caption tokens.
    pub fn first_computed(&self) -> usize {
        if self.nodes.get(1).is_some_and(|n| n.op == Op::Tokens) {
            2
        } else {
            1
        }
    }

    /// Cut the graph into `stages`, `nodes` per stage when given (node
    /// counts in graph order, summing to every node after the inputs), or
    /// balanced by each node's cost (`costs`, or else its estimated cost),
    /// preferring cuts that carry one value.
    pub fn stage_plan(
        &self,
        stages: usize,
        nodes: Option<&[usize]>,
        costs: Option<&[f64]>,
    ) -> Result<StagePlan, String> {
        let costs = match costs {
            Some(c) if c.len() == self.nodes.len() => c.to_vec(),
            _ => self.node_costs(),
        };
        let first = self.first_computed();
        let computed = self.nodes.len().saturating_sub(first);
        if stages == 0 || stages > computed {
            return Err(format!(
                "{stages} stages cannot split a graph of {computed} computing nodes: each stage needs at least one"
            ));
        }
        let bounds = match nodes {
            Some(counts) => {
                if counts.len() != stages || counts.contains(&0) || counts.iter().sum::<usize>() != computed {
                    return Err(format!(
                        "distributed.balance {counts:?} must give each of the {stages} stages at least one node, {computed} nodes in all (the model's nodes after its input{})",
                        if first == 2 { "s" } else { "" }
                    ));
                }
                let mut bounds = vec![first];
                for c in counts {
                    bounds.push(bounds[bounds.len() - 1] + c);
                }
                bounds
            }
            None => self.balanced_bounds(stages, &costs),
        };
        let total = costs[first..].iter().sum::<f64>().max(f64::MIN_POSITIVE);
        let ranges: Vec<Range<usize>> = bounds.windows(2).map(|w| w[0]..w[1]).collect();
        let carried = ranges.iter().map(|r| self.carried_at(r.end)).collect();
        let cost_share = ranges.iter().map(|r| costs[r.clone()].iter().sum::<f64>() / total).collect();
        Ok(StagePlan { ranges, carried, cost_share })
    }

    /// Estimated forward cost of each node: its multiply-accumulates and
    /// the values it writes (the work of element-wise ops).
    pub fn node_costs(&self) -> Vec<f64> {
        self.nodes
            .iter()
            .map(|n| {
                let first = n.inputs.first().map_or(&[][..], |&i| self.nodes[i].shape.as_slice());
                let second = n.inputs.get(1).map(|&i| self.nodes[i].shape.as_slice());
                let macs = match n.op {
                    Op::Input | Op::Tokens => 0,
                    _ => n.op.forward_macs(first, second, &n.shape),
                };
                let writes = if matches!(n.op, Op::Input | Op::Tokens) { 0 } else { values(&n.shape) };
                macs as f64 + writes as f64
            })
            .collect()
    }

    /// The values a cut before node `k` carries: earlier nodes that a node
    /// from `k` on reads, and the output once it is computed.
    pub fn carried_at(&self, k: usize) -> Vec<usize> {
        let mut read_later = vec![false; k.min(self.nodes.len())];
        for node in self.nodes.iter().skip(k) {
            for &i in &node.inputs {
                if i < k {
                    read_later[i] = true;
                }
            }
        }
        if self.output < k {
            read_later[self.output] = true;
        }
        (0..read_later.len()).filter(|&i| read_later[i]).collect()
    }

    /// Cut points for `stages` stages of about equal estimated cost: each
    /// cut goes at the place nearest its share of the total among those
    /// carrying one float value, or at the nearest place where none does.
    fn balanced_bounds(&self, stages: usize, costs: &[f64]) -> Vec<usize> {
        let first = self.first_computed();
        let n = self.nodes.len();
        let mut cumulative = vec![0.0; n + 1];
        for i in 0..n {
            cumulative[i + 1] = cumulative[i] + costs[i];
        }
        let total = cumulative[n];
        let clean: Vec<bool> = self.float_values_carried().into_iter().map(|c| c <= 1).collect();
        let mut bounds = vec![first];
        for j in 1..stages {
            let lo = bounds[j - 1] + 1;
            let hi = n - (stages - j);
            let target = cumulative[first] + (total - cumulative[first]) * j as f64 / stages as f64;
            let distance = |k: &usize| (cumulative[*k] - target).abs();
            let nearest = |only_clean: bool| {
                (lo..=hi)
                    .filter(|&k| !only_clean || clean[k])
                    .min_by(|a, b| distance(a).total_cmp(&distance(b)))
            };
            bounds.push(nearest(true).or_else(|| nearest(false)).unwrap_or(lo));
        }
        bounds.push(n);
        bounds
    }
}

impl Graph {
    /// For each cut `k` in `0..=nodes`, how many float values it carries
    /// (the caption tokens not counted), in one pass over the graph.
    fn float_values_carried(&self) -> Vec<usize> {
        let n = self.nodes.len();
        let mut last = vec![None; n];
        for (j, node) in self.nodes.iter().enumerate() {
            for &i in &node.inputs {
                last[i] = Some(j);
            }
        }
        // Value `v` crosses cuts v+1 ..= its last reader (every later cut for the output).
        let mut delta = vec![0isize; n + 2];
        for v in 0..n {
            let until = if v == self.output { Some(n) } else { last[v] };
            if let Some(until) = until.filter(|_| self.nodes[v].op != Op::Tokens) {
                delta[v + 1] += 1;
                delta[until + 1] -= 1;
            }
        }
        let mut live = 0isize;
        (0..=n)
            .map(|k| {
                live += delta[k];
                live.max(0) as usize
            })
            .collect()
    }
}

impl StagePlan {
    /// Per stage, the values one sample holds for its backward pass: all
    /// its nodes' outputs (its graph kept), and its input alone (the
    /// values carried into it, re-materialised).
    pub fn held_values(&self, graph: &Graph) -> Vec<(u64, u64)> {
        self.ranges
            .iter()
            .enumerate()
            .map(|(k, range)| {
                let input = if k == 0 { vec![0] } else { self.carried[k - 1].clone() };
                (stage_values(graph, range.clone()), carried_values(graph, &input))
            })
            .collect()
    }

    /// Values per sample of a micro-batch that a step holds at least:
    /// every stage's graph for the `micro_batches − recomputed` micro-batches
    /// that keep it, the inputs of the `recomputed` others, and one
    /// micro-batch's graph of the largest stage while it recomputes.
    pub fn step_values(&self, graph: &Graph, micro_batches: usize, recomputed: usize) -> u64 {
        let held = self.held_values(graph);
        let (kept, remat) = ((micro_batches - recomputed) as u64, recomputed as u64);
        let stages = held.iter().fold(0u64, |sum, &(full, input)| {
            sum.saturating_add(kept.saturating_mul(full)).saturating_add(remat.saturating_mul(input))
        });
        let largest = held.iter().map(|&(full, _)| full).max().unwrap_or(0);
        stages.saturating_add(if recomputed > 0 { largest } else { 0 })
    }
}

/// Values in one sample of each node in `range`: what a stage keeps for
/// its backward pass, per sample, without re-materialisation.
fn stage_values(graph: &Graph, range: Range<usize>) -> u64 {
    graph.kept_values()[range].iter().fold(0, |sum, &v| sum.saturating_add(v))
}

/// Values in one sample of the nodes in `carried`.
fn carried_values(graph: &Graph, carried: &[usize]) -> u64 {
    carried
        .iter()
        .filter(|&&i| graph.nodes[i].op != Op::Tokens)
        .map(|&i| values(&graph.nodes[i].shape))
        .fold(0, u64::saturating_add)
}
