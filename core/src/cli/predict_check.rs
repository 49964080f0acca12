//! A prediction set against what was measured: every multi-worker cell of
//! the run that differs from the predicted-from cell only in its workers,
//! batch, collective, buckets and link ([`WORKER_KEYS`]), over the network
//! the link's figures describe, priced with its own gradient buckets and
//! all-reduce algorithm.
//!
//! - **measured step**: the median over its repeats of the cell's step p50;
//! - **predicted step**: the model's for that many workers, weak scaling
//!   when the cell's per-worker batch is the base's, strong when its
//!   global batch is;
//! - **error** = predicted ÷ measured − 1;
//! - **measured efficiency**: base step ÷ cell step (weak), or base step ÷
//!   (workers × cell step) (strong), the base step measured the same way.

use crate::predict::{self, Algorithm, Measured, Scaling, Topology};
use crate::runner::CellRecord;
use benchkit_schema::scaling::WORKER_KEYS;
use benchkit_schema::stats::median;
use serde::Serialize;

/// One measured cell and its prediction.
#[derive(Clone, Debug, Serialize)]
pub(super) struct Check {
    pub cell: String,
    pub workers: usize,
    pub scaling: &'static str,
    pub algorithm: &'static str,
    pub link: String,
    pub measured_step_s: f64,
    pub predicted_step_s: f64,
    /// `predicted ÷ measured − 1`.
    pub error: f64,
    pub measured_efficiency: f64,
    pub predicted_efficiency: f64,
}

/// The median over a cell's runs of their step p50, in seconds.
fn step_s(cell: &CellRecord) -> Option<f64> {
    let p50s: Vec<f64> =
        cell.runs.iter().map(|r| r.step_ms.p50 / 1e3).filter(|s| s.is_finite() && *s > 0.0).collect();
    (!p50s.is_empty()).then(|| median(&p50s))
}

/// The swept values of `cell` other than the worker keys, as text.
fn other_axes(cell: &CellRecord) -> Vec<(String, String)> {
    cell.axes
        .iter()
        .filter(|(k, _)| !WORKER_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect()
}

/// Every cell of `cells` the prediction from `base` over `topology` can be checked against.
pub(super) fn checks(
    base: &CellRecord,
    measured: &Measured,
    cells: &[CellRecord],
    topology: &Topology,
) -> Vec<Check> {
    let Some(over) = topology.inter.over.as_deref() else { return Vec::new() };
    let Some(base_step) = step_s(base) else { return Vec::new() };
    let key = other_axes(base);
    let mut out = Vec::new();
    for cell in cells {
        let Some(run) = cell.runs.first() else { continue };
        let p = &run.parallel;
        let workers = p.workers;
        if workers < 2 || p.link.as_deref() != Some(over) || other_axes(cell) != key {
            continue;
        }
        let scaling = if run.batch_size == measured.batch * workers {
            Scaling::Weak
        } else if run.batch_size == measured.batch {
            Scaling::Strong
        } else {
            continue;
        };
        let Some(step) = step_s(cell) else { continue };
        let communication = p.communication.as_ref();
        let algorithm = match communication.map(|c| c.algorithm.as_str()) {
            Some("tree") => Algorithm::Tree,
            _ => Algorithm::Ring,
        };
        let buckets = match communication.map(|c| &c.bucket_bytes) {
            Some(b) if !b.is_empty() => b.iter().map(|&b| b as f64).collect(),
            _ => measured.buckets.clone(),
        };
        let priced = Measured { buckets, ..measured.clone() };
        let point = predict::point(&priced, topology, algorithm, scaling, workers);
        let (scaling, measured_efficiency) = match scaling {
            Scaling::Weak => ("weak", base_step / step),
            Scaling::Strong => ("strong", base_step / (workers as f64 * step)),
        };
        out.push(Check {
            cell: cell.cell.clone(),
            workers,
            scaling,
            algorithm: algorithm.name(),
            link: over.to_string(),
            measured_step_s: step,
            predicted_step_s: point.step_s,
            error: point.step_s / step - 1.0,
            measured_efficiency,
            predicted_efficiency: point.efficiency,
        });
    }
    out.sort_by_key(|c| (c.scaling, c.workers));
    out
}

/// The checks as a table.
pub(super) fn print(checks: &[Check]) {
    if checks.is_empty() {
        return;
    }
    println!("\nagainst the measured cells over {}", checks[0].link);
    println!(
        "{:<40}  {:>7}  {:>6}  {:>13}  {:>14}  {:>7}  {:>8}  {:>9}",
        "cell", "workers", "kind", "measured step", "predicted step", "error", "meas eff", "pred eff"
    );
    for c in checks {
        println!(
            "{:<40}  {:>7}  {:>6}  {:>10.1} ms  {:>11.1} ms  {:>+6.1}%  {:>7.1}%  {:>8.1}%",
            c.cell,
            c.workers,
            c.scaling,
            c.measured_step_s * 1e3,
            c.predicted_step_s * 1e3,
            c.error * 100.0,
            c.measured_efficiency * 100.0,
            c.predicted_efficiency * 100.0
        );
    }
}
