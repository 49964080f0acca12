//! The results store of one run, `results/<run-id>/`:
//! - `run.json`: the resolved config of every cell, environment, plugins;
//! - `cells/<slug>.json`: one per cell, replaced atomically (write, then
//!   rename) after each of its repeats, so a killed run never leaves half a file;
//! - `events.jsonl`: every event as it happens, one JSON object per line.
//!
//! `run.json` names the results schema the directory was written with; a
//! directory of another schema is refused, naming both versions.

//!
//! Its parts: [`write`] (the store a run writes), [`read`] (results
//! directories read back, as input), [`events`] (a cell's events read back
//! in order), [`artifacts`] (what reporters return, written beside) and
//! [`layout`] (every name benchkit itself writes there).

pub mod artifacts;
pub mod events;
pub mod layout;
pub mod read;
pub mod write;

pub use write::{write_atomic, Store};

use crate::config::{Axis, Cell, Plan};
use crate::measure::Environment;
use crate::report::PluginUse;
pub use benchkit_schema::run_file::SliceRecord;
pub use benchkit_schema::{CellRecord, FailedRepeat};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `run.json`.
#[derive(Clone, Debug, Serialize)]
pub struct RunRecord<'a> {
    /// The results schema of everything in the directory.
    pub schema: &'a str,
    pub run_id: &'a str,
    pub name: &'a str,
    pub config_file: &'a Path,
    /// The config file's text as the run read it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_text: Option<&'a str>,
    /// The commit of the git checkout holding the config file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_commit: Option<&'a str>,
    pub created_unix_ms: u64,
    pub environment: &'a Environment,
    pub plugins: &'a [PluginUse],
    /// The config without its matrix.
    pub base: &'a Plan,
    pub axes: &'a [Axis],
    pub cells: &'a [Cell],
    /// `benchkit run --mock`: every figure in the directory is invented.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mock: bool,
    /// The slice of the matrix this run holds (`--slice`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice: Option<&'a SliceRecord>,
    /// The slices `benchkit merge` joined into this run.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub merged_from: &'a [MergedSlice],
}

pub use benchkit_schema::run_file::MergedSlice;

/// The parts of `run.json` a resumed run needs back.
#[derive(Clone, Debug, Deserialize)]
pub struct StoredRun {
    /// Absent in directories written before the schema had a version.
    #[serde(default)]
    pub schema: Option<String>,
    pub run_id: String,
    pub name: String,
    pub config_file: PathBuf,
    /// The config file's text (absent before schema 2.10.0).
    #[serde(default)]
    pub config_text: Option<String>,
    /// The commit of the git checkout holding the config file (absent before schema 2.11.0).
    #[serde(default)]
    pub config_commit: Option<String>,
    /// When the run began.
    #[serde(default)]
    pub created_unix_ms: u64,
    pub base: Plan,
    pub axes: Vec<Axis>,
    pub cells: Vec<Cell>,
    #[serde(default)]
    pub mock: bool,
    /// Where rank 0 ran (absent in directories written before it was kept).
    #[serde(default)]
    pub environment: Option<Environment>,
    #[serde(default)]
    pub slice: Option<SliceRecord>,
    #[serde(default)]
    pub merged_from: Vec<MergedSlice>,
}

/// The record of `cell` before any repeat ran.
pub fn new_record(cell: &Cell) -> CellRecord {
    CellRecord {
        index: cell.index,
        cell: cell.id.clone(),
        axes: cell.axes.clone(),
        repeats_asked: cell.plan.repeats_per_cell(),
        repeats: Vec::new(),
        failures: Vec::new(),
        summary: None,
        machine: None,
    }
}
