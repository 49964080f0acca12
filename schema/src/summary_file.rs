//! `summary.json`, the `json` reporter's whole run in one document, as a
//! program reads it back: the run's header, every cell's statistics over
//! its repeats, every finished repeat, every failure and the run's end.
//! The reporter writes each as the event it was (with its `event` tag and
//! `time_ms`); reading keeps the figures and leaves the tags.

use crate::{CellFailed, CellResult, CellSummary, RunEnd, RunStart};
use serde::Deserialize;

/// `summary.json`.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct RunSummary {
    /// The results schema the document follows.
    pub schema: String,
    /// The `run-start` event: config, environment, plugins, axes.
    pub run: RunStart,
    #[serde(default)]
    pub mock: bool,
    /// Each cell's statistics over its repeats, with its scaling.
    pub summaries: Vec<CellSummary>,
    /// Every finished repeat of every cell, in the order they finished.
    pub repeats: Vec<CellResult>,
    /// Every repeat that failed.
    pub failures: Vec<CellFailed>,
    /// The `run-end` event; absent while the run had not ended.
    pub end: Option<RunEnd>,
}
