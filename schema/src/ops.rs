//! Where a profiled step's time goes, op by op of the model's graph, and
//! where two backends' steps differ. Every backend that runs a cell runs the
//! same graph, so its rows carry the graph's node names and line up by
//! name across backends.

use serde::{Deserialize, Serialize};

/// What kind of work an op row is, for sums over many ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum OpCategory {
    /// Convolutions, patch embeddings among them.
    Convolution,
    /// Batch, layer and L2 norms.
    Normalization,
    /// Element-wise ops: activations, additions, dropout, position embeddings.
    Pointwise,
    /// Max, average and adaptive pooling, token means.
    Pooling,
    /// Fully connected layers.
    Linear,
    /// Attention, windowed or not, projections included.
    Attention,
    /// LSTM layers.
    Recurrent,
    /// The task's loss on the graph's output.
    Loss,
    /// The optimizer's update.
    Optimizer,
    /// Data movement and the rest: reshapes, concatenations, embeddings
    /// looked up, the batch copied to the device, waiting for the loader.
    Other,
}

impl OpCategory {
    /// Every category, in the order tables list them.
    pub const ALL: [OpCategory; 10] = [
        OpCategory::Convolution,
        OpCategory::Normalization,
        OpCategory::Pointwise,
        OpCategory::Pooling,
        OpCategory::Linear,
        OpCategory::Attention,
        OpCategory::Recurrent,
        OpCategory::Loss,
        OpCategory::Optimizer,
        OpCategory::Other,
    ];

    /// The name tables print.
    pub fn label(self) -> &'static str {
        match self {
            OpCategory::Convolution => "convolution",
            OpCategory::Normalization => "normalization",
            OpCategory::Pointwise => "pointwise",
            OpCategory::Pooling => "pooling",
            OpCategory::Linear => "linear",
            OpCategory::Attention => "attention",
            OpCategory::Recurrent => "recurrent",
            OpCategory::Loss => "loss",
            OpCategory::Optimizer => "optimizer",
            OpCategory::Other => "data movement/other",
        }
    }
}

/// One op of the graph (or one part of the step outside it: the loss,
/// the optimizer, the copy to the device, the wait for data) in the mean
/// profiled step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct OpRow {
    /// The graph node's full name (`layer1.0.conv1`), or `loss`,
    /// `optimizer`, `host-to-device`, `data wait`.
    pub name: String,
    /// The op as a model plugin names it (`conv2d`); for the rows outside
    /// the graph, the row's name.
    pub op: String,
    pub category: OpCategory,
    /// Mean milliseconds per profiled step in the op's forward pass.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub forward_ms: f64,
    /// Mean milliseconds per profiled step in the op's backward pass.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub backward_ms: f64,
    /// Multiply-accumulates of one step through the op, forward and
    /// backward, over the whole batch (see [`OpRow::gflops`]).
    #[serde(default)]
    pub macs: u64,
    /// The least bytes one step through the op reads and writes, forward
    /// and backward, over the whole batch (see [`OpRow::gbps`]).
    #[serde(default)]
    pub bytes: u64,
    /// Minor page faults the process took per step in the op, forward and
    /// backward: pages of fresh memory touched for the first time, which
    /// the kernel maps and zeroes (an allocator handing out new memory).
    #[serde(default)]
    pub page_faults: f64,
}

impl OpRow {
    /// Forward and backward milliseconds.
    pub fn ms(&self) -> f64 {
        self.forward_ms + self.backward_ms
    }

    /// Achieved GFLOP/s, a multiply-accumulate counted as two operations.
    ///
    /// Formula: op GFLOP/s = 2 × macs / (ms × 10⁶).
    pub fn gflops(&self) -> f64 {
        per_ms(2.0 * self.macs as f64, self.ms())
    }

    /// Achieved GB/s (10⁹ bytes) of the least traffic the op needs.
    ///
    /// Formula: op GB/s = bytes / (ms × 10⁶).
    pub fn gbps(&self) -> f64 {
        per_ms(self.bytes as f64, self.ms())
    }
}

fn per_ms(amount: f64, ms: f64) -> f64 {
    if amount > 0.0 && ms > 0.0 {
        amount / (ms * 1e6)
    } else {
        f64::NAN
    }
}

/// A cell's profiled steps op by op (`[profile] ops = true`): every step
/// with its ops timed is also a profiled step of [`crate::StepPhases`],
/// and none of them enters the headline figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct OpProfile {
    /// The backend that ran the ops (`flex`, `tch`, `pytorch`, …).
    pub backend: String,
    /// Profiled steps the means are over.
    pub steps: usize,
    /// Mean profiled step, data wait included, in milliseconds.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub step_ms: f64,
    /// Mean plain step of the same cell, in milliseconds (NaN with none).
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub plain_step_ms: f64,
    /// The graph's ops in graph order, then the rows outside the graph.
    pub rows: Vec<OpRow>,
    /// What could not be attributed to a row, and why, where something could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The slowest ops timed alone on the same backend (`[profile] check`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<OpCheck>,
    /// Bytes in a page of the machine's memory, for page faults as bytes.
    #[serde(default = "page_bytes")]
    pub page_bytes: u64,
}

fn page_bytes() -> u64 {
    4096
}

/// How far an op's time in the profiled steps may be from its time alone.
pub const CHECK_TOLERANCE_PCT: f64 = 15.0;

/// One op of a profile against the backend itself: a graph of that op alone,
/// at the same input shape, batch and float format, on the same backend and
/// device, its forward and backward passes timed over many runs (the
/// device synchronised around each) by the backend's own means: benchkit's
/// clock on burn's backends, `torch.utils.benchmark` on PyTorch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct OpCheck {
    /// The graph node's name, as in the profile's rows.
    pub name: String,
    /// Its forward and backward milliseconds in the profiled steps.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub profiled_ms: f64,
    /// The median milliseconds of one forward and backward pass alone.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub alone_ms: f64,
    /// Runs the median is over.
    pub runs: usize,
    /// Its minor page faults per step in the profiled steps (the row's).
    #[serde(default)]
    pub profiled_page_faults: f64,
    /// Its minor page faults per run alone.
    #[serde(default)]
    pub alone_page_faults: f64,
}

impl OpCheck {
    /// How far the profiled figure is from the op alone.
    ///
    /// Formula: op check difference % = 100 × (profiled_ms / alone_ms − 1).
    pub fn difference_pct(&self) -> f64 {
        100.0 * (self.profiled_ms / self.alone_ms - 1.0)
    }

    /// Whether the difference is within [`CHECK_TOLERANCE_PCT`].
    pub fn agrees(&self) -> bool {
        self.difference_pct().abs() <= CHECK_TOLERANCE_PCT
    }

    /// Why the op took longer in the step than alone, where the step
    /// handed it fresh memory (a page fault a page) that the runs alone,
    /// reusing theirs, did not take: the difference is then the
    /// allocator's, not the op's.
    pub fn fresh_memory(&self) -> bool {
        !self.agrees()
            && self.difference_pct() > 0.0
            && self.profiled_page_faults > 2.0 * self.alone_page_faults + 100.0
    }
}

impl OpProfile {
    /// Milliseconds of the mean profiled step the rows account for.
    pub fn attributed_ms(&self) -> f64 {
        self.rows.iter().map(OpRow::ms).sum()
    }

    /// The rest of the profiled step: never spread over the rows.
    ///
    /// Formula: not attributed ms = step_ms − Σ rows (forward_ms + backward_ms).
    pub fn unattributed_ms(&self) -> f64 {
        self.step_ms - self.attributed_ms()
    }

    /// What timing every op cost a step.
    ///
    /// Formula: op profiling overhead % = 100 × (step_ms / plain_step_ms − 1).
    pub fn overhead_pct(&self) -> f64 {
        100.0 * (self.step_ms / self.plain_step_ms - 1.0)
    }

    /// Milliseconds per category, in [`OpCategory::ALL`]'s order (categories with no row: 0).
    pub fn category_ms(&self) -> [f64; 10] {
        let mut sums = [0.0; 10];
        for row in &self.rows {
            if let Some(i) = OpCategory::ALL.iter().position(|f| *f == row.category) {
                sums[i] += row.ms();
            }
        }
        sums
    }
}

/// The name of the row that holds what no op row accounts for.
pub const UNATTRIBUTED: &str = "not attributed";

/// One row of a gap table: an op (or a category) on an backend and on the reference.
#[derive(Clone, Debug, PartialEq)]
pub struct GapRow {
    pub name: String,
    pub category: Option<OpCategory>,
    /// Milliseconds per profiled step on the backend.
    pub ms: f64,
    /// Milliseconds per profiled step on the reference backend.
    pub reference_ms: f64,
    /// `ms / reference_ms`.
    pub ratio: f64,
    /// This row's part of the step's gap, in percent (see [`gap`]).
    pub share_pct: f64,
}

/// Where one backend's profiled step differs from a reference backend's on the same graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Gap {
    pub step_ms: f64,
    pub reference_step_ms: f64,
    /// Every op of either backend, the not-attributed row among them, by
    /// share of the gap, largest first.
    pub ops: Vec<GapRow>,
    /// The same summed by category, the not-attributed row last.
    pub categories: Vec<GapRow>,
}

/// `backend`'s profiled step against `reference`'s, op by op (matched by
/// name; an op one backend lacks counts 0 ms there), by category, and with
/// what neither attributes as a row of its own. The shares of all rows
/// add up to 100 %.
///
/// Formula: gap share % of row k = 100 × (ms_k − ref_ms_k) / (step_ms − ref_step_ms); ratio_k = ms_k / ref_ms_k.
pub fn gap(backend: &OpProfile, reference: &OpProfile) -> Gap {
    let total = backend.step_ms - reference.step_ms;
    let row = |name: &str, category: Option<OpCategory>, ms: f64, reference_ms: f64| GapRow {
        name: name.to_string(),
        category,
        ms,
        reference_ms,
        ratio: ms / reference_ms,
        share_pct: 100.0 * (ms - reference_ms) / total,
    };
    let find = |p: &OpProfile, name: &str| p.rows.iter().find(|r| r.name == name).map_or(0.0, OpRow::ms);
    let mut names: Vec<(&str, OpCategory)> = Vec::new();
    for r in backend.rows.iter().chain(&reference.rows) {
        if !names.iter().any(|(n, _)| *n == r.name) {
            names.push((&r.name, r.category));
        }
    }
    let unattributed = row(UNATTRIBUTED, None, backend.unattributed_ms(), reference.unattributed_ms());
    let mut ops: Vec<GapRow> = names
        .iter()
        .map(|&(name, category)| row(name, Some(category), find(backend, name), find(reference, name)))
        .collect();
    ops.push(unattributed.clone());
    ops.sort_by(|a, b| b.share_pct.total_cmp(&a.share_pct));
    let (mine, theirs) = (backend.category_ms(), reference.category_ms());
    let mut categories: Vec<GapRow> = OpCategory::ALL
        .iter()
        .enumerate()
        .filter(|&(i, _)| mine[i] != 0.0 || theirs[i] != 0.0)
        .map(|(i, f)| row(f.label(), Some(*f), mine[i], theirs[i]))
        .collect();
    categories.sort_by(|a, b| b.share_pct.total_cmp(&a.share_pct));
    categories.push(unattributed);
    Gap { step_ms: backend.step_ms, reference_step_ms: reference.step_ms, ops, categories }
}

/// Cells that differ only in their backend, each with its op profile: one
/// group per set of the other axes' values, in the cells' order, the
/// reference first. The reference is the cell on backend `reference`
/// where one is named and present; else the first PyTorch eager row (the
/// backend burn's users measure against); else the group's fastest
/// profiled step. Groups of one cell are left out.
pub fn backend_groups<'a>(
    cells: &[&'a crate::CellSummary],
    reference: Option<&str>,
) -> Vec<Vec<&'a crate::CellSummary>> {
    let mut groups: Vec<(String, Vec<&'a crate::CellSummary>)> = Vec::new();
    for &c in cells.iter().filter(|c| c.ops.is_some()) {
        let mut others = c.axes.clone();
        others.remove("backend");
        let key = serde_json::Value::Object(others).to_string();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(c),
            None => groups.push((key, vec![c])),
        }
    }
    groups
        .into_iter()
        .filter(|(_, members)| members.len() > 1)
        .map(|(_, mut members)| {
            let backend = |c: &crate::CellSummary| c.backend.clone().unwrap_or_default();
            let step = |c: &crate::CellSummary| c.ops.as_ref().map_or(f64::INFINITY, |o| o.step_ms);
            let named = reference.and_then(|r| members.iter().position(|c| backend(c) == r));
            let eager = || {
                members.iter().position(|c| {
                    let b = backend(c);
                    (b == "pytorch" || b == "pytorch-cuda")
                        && c.ops.as_ref().is_some_and(|o| !o.backend.contains("compiled"))
                })
            };
            let fastest =
                || (0..members.len()).min_by(|&a, &b| step(members[a]).total_cmp(&step(members[b])));
            if let Some(first) = named.or_else(eager).or_else(fastest) {
                let r = members.remove(first);
                members.insert(0, r);
            }
            members
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, category: OpCategory, forward_ms: f64, backward_ms: f64) -> OpRow {
        OpRow {
            name: name.into(),
            op: name.into(),
            category,
            forward_ms,
            backward_ms,
            macs: 0,
            bytes: 0,
            page_faults: 0.0,
        }
    }

    fn profile(step_ms: f64, rows: Vec<OpRow>) -> OpProfile {
        OpProfile {
            backend: "e".into(),
            steps: 4,
            step_ms,
            plain_step_ms: 90.0,
            rows,
            note: None,
            checks: Vec::new(),
            page_bytes: 4096,
        }
    }

    #[test]
    fn a_gap_is_shared_out_by_hand() {
        // Engine: conv 60 + bn 20 + relu 10 + optimizer 5 = 95 of 100 ms.
        let backend = profile(
            100.0,
            vec![
                op("conv", OpCategory::Convolution, 20.0, 40.0),
                op("bn", OpCategory::Normalization, 5.0, 15.0),
                op("relu", OpCategory::Pointwise, 4.0, 6.0),
                op("optimizer", OpCategory::Optimizer, 0.0, 5.0),
            ],
        );
        // Reference: conv 30 + bn 10 + relu 10 + optimizer 5 = 55 of 60 ms.
        let reference = profile(
            60.0,
            vec![
                op("conv", OpCategory::Convolution, 10.0, 20.0),
                op("bn", OpCategory::Normalization, 4.0, 6.0),
                op("relu", OpCategory::Pointwise, 5.0, 5.0),
                op("optimizer", OpCategory::Optimizer, 0.0, 5.0),
            ],
        );
        let g = gap(&backend, &reference);
        // Gap 40 ms: conv +30 (75 %), bn +10 (25 %), relu 0, optimizer 0, not attributed 5 − 5 = 0.
        let share = |name: &str| g.ops.iter().find(|r| r.name == name).unwrap().share_pct;
        assert_eq!(share("conv"), 75.0);
        assert_eq!(share("bn"), 25.0);
        assert_eq!(share("relu"), 0.0);
        assert_eq!(share(UNATTRIBUTED), 0.0);
        assert_eq!(g.ops[0].name, "conv");
        assert_eq!(g.ops[0].ratio, 2.0);
        assert_eq!(g.categories[0].name, "convolution");
        assert_eq!(g.categories.last().unwrap().name, UNATTRIBUTED);
        let total: f64 = g.ops.iter().map(|r| r.share_pct).sum();
        assert!((total - 100.0).abs() < 1e-9, "{total}");
        assert_eq!(backend.unattributed_ms(), 5.0);
        assert!((backend.overhead_pct() - 100.0 / 9.0).abs() < 1e-9);
    }

    #[test]
    fn an_op_only_one_engine_has_counts_zero_on_the_other() {
        let backend = profile(
            30.0,
            vec![op("a", OpCategory::Other, 10.0, 0.0), op("b", OpCategory::Linear, 10.0, 10.0)],
        );
        let reference = profile(10.0, vec![op("a", OpCategory::Other, 10.0, 0.0)]);
        let g = gap(&backend, &reference);
        let b = g.ops.iter().find(|r| r.name == "b").unwrap();
        assert_eq!((b.reference_ms, b.share_pct), (0.0, 100.0));
        assert!(b.ratio.is_infinite());
    }

    #[test]
    fn a_check_agrees_within_its_tolerance() {
        let check = |profiled_ms: f64| OpCheck {
            name: "conv".into(),
            profiled_ms,
            alone_ms: 2.0,
            runs: 9,
            profiled_page_faults: 0.0,
            alone_page_faults: 0.0,
        };
        // 2.2 against 2.0 ms alone: +10 %; 2.4: +20 %; 1.6: −20 %.
        assert!((check(2.2).difference_pct() - 10.0).abs() < 1e-9 && check(2.2).agrees());
        assert!(!check(2.4).agrees() && !check(1.6).agrees());
        // 20 % slower in the step, with 12,545 page faults there and none alone: fresh memory.
        let faulted = OpCheck { profiled_page_faults: 12_545.0, ..check(2.4) };
        assert!(faulted.fresh_memory() && !check(2.4).fresh_memory());
    }

    #[test]
    fn achieved_rates_count_a_mac_as_two_operations() {
        let mut r = op("conv", OpCategory::Convolution, 1.0, 1.0);
        r.macs = 1_000_000_000;
        r.bytes = 4_000_000;
        // 2e9 operations in 2 ms: 1000 GFLOP/s; 4 MB in 2 ms: 2 GB/s.
        assert_eq!(r.gflops(), 1000.0);
        assert_eq!(r.gbps(), 2.0);
    }
}
