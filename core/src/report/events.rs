//! The events of a run, as reporters receive them: JSON objects with an
//! `event` tag and the wall-clock `time_ms` at which they happened.

use super::{CellResult, CellSummary};
use crate::config::{Axis, Plan};
use crate::measure::Environment;
use crate::train::EpochRecord;
use serde::{Deserialize, Serialize};

/// A plugin the run used, with what identifies its build.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PluginUse {
    pub role: String,
    pub origin: String,
    pub name: String,
    pub version: String,
    pub sha256: String,
}

/// A cell as announced at the start of a run.
#[derive(Clone, Debug, Serialize)]
pub struct CellHeader {
    pub index: usize,
    pub cell: String,
    pub axes: serde_json::Map<String, serde_json::Value>,
}

/// One event of a run.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event<'a> {
    RunStart {
        run_id: &'a str,
        name: &'a str,
        /// The config without its matrix; each cell's own is in `cell-start`.
        config: &'a Plan,
        environment: &'a Environment,
        plugins: &'a [PluginUse],
        axes: &'a [Axis],
        cells: &'a [CellHeader],
        repeats: u32,
        /// Cells already finished by an earlier, interrupted run of the same id.
        resumed_cells: usize,
    },
    CellStart {
        cell: &'a str,
        repeat: u32,
        repeats: u32,
        /// The cell's resolved config.
        config: &'a Plan,
    },
    Epoch {
        cell: &'a str,
        repeat: u32,
        #[serde(flatten)]
        record: &'a EpochRecord,
    },
    /// One repeat of a cell finished.
    Cell(&'a CellResult),
    /// One repeat of a cell failed; the run goes on.
    CellFailed {
        cell: &'a str,
        repeat: u32,
        reason: &'a str,
        /// The plugin at fault, when one was, and the call that failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        plugin: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        call: Option<&'a str>,
    },
    /// A cell is over: its statistics across repeats.
    CellSummary(&'a CellSummary),
    RunEnd {
        run_id: &'a str,
        name: &'a str,
        cells: usize,
        failed: usize,
        wall_s: f64,
    },
}

impl Event<'_> {
    /// The event as JSON, stamped with the current wall-clock time.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(map) = value.as_object_mut() {
            map.insert("time_ms".into(), crate::measure::env::unix_ms().into());
        }
        value
    }
}
