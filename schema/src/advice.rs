//! `advice.json`: what `benchkit advise` made of a run. For each cell, its
//! step decomposed, the changes considered with their predicted effect and
//! the measured figures each used, which were advised (a predicted gain
//! beyond the run's noise), and, once `--verify` has run the follow-up
//! config, what each change measured against what was predicted.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `advice.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct AdviceReport {
    /// The results schema this file follows.
    pub schema: String,
    /// The results directory advised on.
    pub run: String,
    pub cells: Vec<CellAdvice>,
    /// Cells no advice was given for, and why.
    pub refused: Vec<Refusal>,
    /// The follow-up config (`advice.toml`), where one was written.
    pub follow_up: Option<String>,
    /// The results directory `--verify` measured the follow-up config into.
    pub verified_in: Option<String>,
}

/// A cell advice could not be given for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Refusal {
    pub cell: String,
    pub why: String,
}

/// One cell's advice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct CellAdvice {
    pub cell: String,
    /// What a person calls the cell (its summary's `label`). Since 2.8.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The cell's axes in its run (key → value).
    pub axes: serde_json::Map<String, serde_json::Value>,
    /// The cell as the run measured it.
    pub measured: Measured,
    pub decomposition: Decomposition,
    /// What limits the step, as the cell's verdict names it.
    pub bottleneck: String,
    /// The smallest change in images/s advised, in percent: the run's
    /// noise (`benchkit advise`'s `noise_pct`).
    pub noise_pct: f64,
    /// Changes predicted to gain more than the noise, best first.
    pub advised: Vec<Change>,
    /// Changes considered whose predicted gain is inside the noise.
    pub not_advised: Vec<Change>,
    /// What could not be considered, and why.
    pub notes: Vec<String>,
    /// The cell as it ran, measured again by `--verify` beside the changes.
    pub remeasured: Option<Measured>,
}

/// A step's time by where it went, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Decomposition {
    /// The median step (over repeats, each its median step).
    pub step_ms: f64,
    pub data_wait_ms: f64,
    /// Forward, backward and optimizer: where the cell was profiled.
    pub forward_ms: Option<f64>,
    pub backward_ms: Option<f64>,
    pub optimizer_ms: Option<f64>,
    /// Forward, backward and optimizer together, less exposed communication.
    pub compute_ms: f64,
    pub exposed_communication_ms: f64,
    /// The step outside the parts above (host-to-device copies, handing
    /// parts to replicas, bookkeeping).
    pub other_ms: f64,
    /// Whether the parts come from profiled steps (their means), or from
    /// the step's medians of data wait, compute and exposed communication.
    pub profiled: bool,
    /// The rank the others waited for beyond the run's noise.
    pub straggler: Option<crate::Straggler>,
}

/// What a change is to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    /// More loader workers (or workers at all).
    LoaderWorkers,
    /// The gradient bucket size.
    BucketSize,
    /// A larger batch per replica.
    Batch,
    /// A backend, precision or layout of the same replicas (processes,
    /// devices a process, collective) another cell of the run measured faster.
    Measured,
    /// Freeing the machine a straggling rank runs on.
    Straggler,
}

/// A change considered for a cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Change {
    pub kind: ChangeKind,
    /// In words, e.g. `data.workers 0 → 1`.
    pub title: String,
    /// The config keys it sets, and their new values; empty where no
    /// config key makes the change (a straggler's machine).
    pub set: BTreeMap<String, serde_json::Value>,
    /// The same keys' values as the cell ran.
    pub was: BTreeMap<String, serde_json::Value>,
    pub predicted: Measured,
    /// The predicted gain in images/s over the cell as measured, in percent.
    pub gain_pct: f64,
    /// The measured figures the prediction used, with their values.
    pub uses: Vec<String>,
    /// What the prediction assumes.
    pub assumptions: Vec<String>,
    /// A swept setting and the step it predicts at each value (the bucket
    /// curve: MiB → step ms).
    pub curve: Vec<[f64; 2]>,
    /// What `--verify` measured, and how far the prediction was from it.
    pub verified: Option<Verification>,
}

/// The figures a prediction gives and a measurement checks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Measured {
    pub images_per_s: f64,
    pub step_ms: f64,
    pub data_wait_pct: f64,
    pub exposed_communication_pct: f64,
}

/// A prediction is scored right when measured within this much, in percent.
pub const TOLERANCE_PCT: f64 = 20.0;

/// The prediction's error against the measurement, in percent, of the
/// gain it predicts: the predicted images/s over the cell as it ran
/// (`before`), against the measured images/s over the cell as it ran
/// measured again beside it in the follow-up run (`again`), so that the
/// machine's own change of speed between the two runs cancels. Without
/// that measurement, of the images/s themselves.
///
/// Formula: 100 × ((predicted / before) / (measured / again) − 1); without again:
/// 100 × (predicted − measured) / measured.
pub fn error_pct(
    predicted: &Measured,
    measured: &Measured,
    before: &Measured,
    again: Option<&Measured>,
) -> f64 {
    let ips = |m: &Measured| m.images_per_s;
    match again.filter(|a| ips(a) > 0.0 && ips(before) > 0.0) {
        Some(a) => 100.0 * ((ips(predicted) / ips(before)) / (ips(measured) / ips(a)) - 1.0),
        None => 100.0 * (ips(predicted) - ips(measured)) / ips(measured),
    }
}

/// A change as `--verify` measured it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Verification {
    /// The follow-up run's cell that made the change.
    pub cell: String,
    pub measured: Measured,
    /// The error of the predicted gain, in percent: `(predicted / before)
    /// / (measured / again) − 1`, `again` the cell as it ran measured
    /// beside the change in the follow-up run (schema 2.10.0); without it,
    /// and before, `(predicted − measured) / measured` images/s.
    pub error_pct: f64,
    /// Whether `|error_pct|` is within the cell's noise band.
    pub within_band: bool,
    /// The measured side's own noise: half the range of the follow-up
    /// cell's repeats' images/s over their median, in percent; NaN with one
    /// repeat (schema 2.10.0).
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub noise_pct: f64,
    /// Whether the error is scored: not where the measured side's own noise
    /// exceeds the tolerance it is scored against ([`crate::advice::TOLERANCE_PCT`]).
    #[serde(default = "yes")]
    pub scored: bool,
    /// Where it missed, the assumption the measurement broke.
    pub why: Option<String>,
}

fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_is_of_the_predicted_images_per_second_against_the_measured() {
        let m = |ips: f64| Measured { images_per_s: ips, ..Measured::default() };
        let before = m(50.0);
        assert!((error_pct(&m(110.0), &m(100.0), &before, None) - 10.0).abs() < 1e-12);
        assert!((error_pct(&m(80.0), &m(100.0), &before, None) + 20.0).abs() < 1e-12);
        // Predicted 50 → 110 (2.2×); measured 100 beside the cell as it ran
        // measured again at 40 (2.5×): the gain is 2.2 / 2.5 − 1 = −12 %,
        // where the images/s alone would say +10 %.
        assert!((error_pct(&m(110.0), &m(100.0), &before, Some(&m(40.0))) + 12.0).abs() < 1e-9);
    }
}
