//! What every change shares: the context it is considered in, its
//! predicted figures, and the record of it.

use super::figures::Figures;
use benchkit_schema::{Change, ChangeKind, Measured};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// What the changes need beside the cell's figures.
pub struct Context<'a> {
    /// The key the cell's batch is set by: `train.batch_per_replica`, or
    /// `train.batch_size` (the global batch).
    pub batch_key: &'a str,
    /// Where a relative path the run recorded is resolved from.
    pub config_dir: Option<&'a Path>,
}

/// A predicted step and what it would measure.
pub struct Predicted {
    pub step_ms: f64,
    pub images_per_s: f64,
    pub data_wait_ms: f64,
    pub exposed_ms: f64,
}

/// A change to `f`, with its prediction, the figures it used and its assumptions.
///
/// Formula: gain % = 100 × (predicted images/s / measured images/s − 1).
pub fn change(
    f: &Figures,
    kind: ChangeKind,
    title: String,
    keys: [BTreeMap<String, Value>; 2],
    p: Predicted,
    uses: Vec<String>,
    assumptions: Vec<String>,
) -> Change {
    let [set, was] = keys;
    Change {
        kind,
        title,
        set,
        was,
        predicted: Measured {
            images_per_s: p.images_per_s,
            step_ms: p.step_ms,
            data_wait_pct: 100.0 * p.data_wait_ms / p.step_ms,
            exposed_communication_pct: 100.0 * p.exposed_ms / p.step_ms,
        },
        gain_pct: 100.0 * (p.images_per_s / f.images_per_s - 1.0),
        uses,
        assumptions,
        curve: Vec::new(),
        verified: None,
    }
}

pub fn keys(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}
