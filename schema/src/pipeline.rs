//! What a pipeline-parallel (GPipe) cell reports: how the model was cut,
//! each stage's compute and idle time, the bubble measured against GPipe's
//! ideal, and each stage's activation memory with and without
//! re-materialisation.

use serde::{Deserialize, Serialize};

/// A pipeline cell's layout and measured figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct PipelineReport {
    pub stages: usize,
    pub micro_batches: usize,
    /// Images in each micro-batch (the first ones one larger where the batch does not divide).
    pub micro_batch: usize,
    /// `never`, `except-last` or `always`.
    pub checkpoint: String,
    /// Devices the stages were placed on.
    pub devices: usize,
    /// `estimated`, `measured` (by node cost) or `given` (node counts).
    pub balance: String,
    /// GPipe's bubble for balanced stages, (S − 1) / (M + S − 1).
    pub ideal_bubble: f64,
    /// The share of the stages' time over the measured steps spent not
    /// computing: 1 − Σ busy / (stages × step time).
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub measured_bubble: f64,
    pub per_stage: Vec<StageReport>,
}

/// One stage: its nodes, cost and time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct StageReport {
    /// Graph nodes, first and last by name.
    pub nodes: usize,
    pub first_node: String,
    pub last_node: String,
    pub params: usize,
    /// Share of the model's forward cost, as the balance reckoned it
    /// (estimated, or measured with `balance = "measured"`).
    pub cost_share: f64,
    /// Mean milliseconds per measured step computing, and not.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub busy_ms: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub idle_ms: f64,
    /// Estimated MiB of activations held for the backward passes: every
    /// micro-batch's (`checkpoint = "never"`), and with every micro-batch
    /// re-materialised (its inputs, and one micro-batch's activations).
    pub activation_mib: f64,
    pub rematerialised_mib: f64,
}

impl PipelineReport {
    /// GPipe's bubble fraction for `stages` balanced stages and `micro_batches`.
    ///
    /// Formula: (S − 1) / (M + S − 1) for S stages and M micro-batches.
    pub fn ideal(stages: usize, micro_batches: usize) -> f64 {
        let s = stages as f64;
        (s - 1.0) / (micro_batches as f64 + s - 1.0)
    }
}

/// What the pipeline table shows, for under it.
pub const PIPELINE_NOTE: &str = "Pipeline: stages × micro-batches (images each), re-materialisation. Bubble: the share of the stages' time not computing over the measured steps, beside GPipe's (S − 1)/(M + S − 1) for balanced stages. Per stage: mean ms per step computing / idle, and its share of the forward cost the balance went by (estimated, or measured with balance = \"measured\"). Activations: estimated MiB held for the backward passes, summed over the stages, with every micro-batch's kept → with every micro-batch re-materialised; the cell's measured peak memory is in the cells table.";

/// The pipeline table (header, then one row per pipeline cell), when any
/// `(cell, report)` is given.
pub fn table(cells: &[(&str, &PipelineReport)]) -> Option<Vec<Vec<String>>> {
    if cells.is_empty() {
        return None;
    }
    let header = [
        "cell",
        "stages × micro-batches",
        "re-materialise",
        "bubble (GPipe)",
        "busy / idle ms per stage",
        "cost share",
        "activations MiB",
    ];
    let mut rows = vec![header.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
    let joined = |f: &dyn Fn(&StageReport) -> String, p: &PipelineReport| {
        p.per_stage.iter().map(f).collect::<Vec<_>>().join(" · ")
    };
    for (cell, p) in cells {
        let bubble = if p.measured_bubble.is_finite() {
            format!("{:.0} % ({:.0} %)", 100.0 * p.measured_bubble, 100.0 * p.ideal_bubble)
        } else {
            format!("- ({:.0} %)", 100.0 * p.ideal_bubble)
        };
        let kept: f64 = p.per_stage.iter().map(|s| s.activation_mib).sum();
        let remat: f64 = p.per_stage.iter().map(|s| s.rematerialised_mib).sum();
        rows.push(vec![
            cell.to_string(),
            format!("{} × {} ({} images)", p.stages, p.micro_batches, p.micro_batch),
            p.checkpoint.clone(),
            bubble,
            joined(&|s| format!("{:.1} / {:.1}", s.busy_ms, s.idle_ms), p),
            joined(&|s| format!("{:.0} %", 100.0 * s.cost_share), p),
            format!("{kept:.1} → {remat:.1}"),
        ]);
    }
    Some(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpipe_bubble() {
        assert_eq!(PipelineReport::ideal(1, 8), 0.0);
        assert!((PipelineReport::ideal(2, 1) - 0.5).abs() < 1e-12);
        assert!((PipelineReport::ideal(2, 4) - 0.2).abs() < 1e-12);
        assert!((PipelineReport::ideal(4, 8) - 3.0 / 11.0).abs() < 1e-12);
    }
}
