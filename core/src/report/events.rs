//! The events of a run, as reporters receive them (JSON with an `event` tag).

use super::CellResult;
use crate::measure::Environment;
use crate::train::EpochRecord;
use serde::Serialize;

/// A plugin the run used, with what identifies its build.
#[derive(Clone, Debug, Serialize)]
pub struct PluginUse {
    pub role: String,
    pub origin: String,
    pub name: String,
    pub version: String,
    pub sha256: String,
}

/// One event of a run.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event<'a> {
    RunStart {
        name: &'a str,
        config: &'a crate::config::Plan,
        environment: &'a Environment,
        plugins: &'a [PluginUse],
    },
    Epoch {
        cell: &'a str,
        #[serde(flatten)]
        record: &'a EpochRecord,
    },
    Cell(&'a CellResult),
    RunEnd {
        name: &'a str,
        cells: usize,
        failed: usize,
        wall_s: f64,
    },
}
