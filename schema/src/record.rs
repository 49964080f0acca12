//! `cells/<slug>.json`: everything measured for one cell of a run, as the
//! host writes it after each repeat and `report`, `compare` and `merge`
//! read it back.

use crate::failure::Failure;
use crate::machine::Machine;
use crate::result::CellResult;
use crate::summary::CellSummary;
use serde::{Deserialize, Serialize};

/// A repeat that did not finish: which, after how long, and why.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct FailedRepeat {
    pub repeat: u32,
    pub wall_s: f64,
    /// Why, its fields at this object's top level.
    #[serde(flatten)]
    pub failure: Failure,
}

/// `cells/<slug>.json`: everything measured for one cell.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct CellRecord {
    pub index: usize,
    pub cell: String,
    pub axes: serde_json::Map<String, serde_json::Value>,
    /// Repeats asked for.
    pub repeats_asked: u32,
    /// Repeats that finished, in order.
    pub repeats: Vec<CellResult>,
    pub failures: Vec<FailedRepeat>,
    /// Present once the cell is over (all repeats done, or one failed).
    pub summary: Option<CellSummary>,
    /// The machine its repeats ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
}

impl CellRecord {
    /// Whether a resumed run can skip this cell: every repeat finished,
    /// and no failure but those tried again.
    pub fn finished(&self) -> bool {
        self.failures.iter().all(|f| f.retried)
            && self.repeats.len() >= self.repeats_asked as usize
            && self.summary.is_some()
    }

    /// Attempts that failed for a transient cause and were tried again.
    pub fn retried(&self) -> usize {
        self.failures.iter().filter(|f| f.retried).count()
    }
}
