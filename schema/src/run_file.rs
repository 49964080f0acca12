//! `run.json`: what a run was asked and where it ran. The resolved config
//! (`base`, and each cell's `plan`) is benchkit's own config with every
//! default filled in; its keys are the configuration reference's, so here
//! they are objects whose keys this schema leaves open.

use crate::{Axis, Environment, PluginUse};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `run.json`, as read back.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct RunFile {
    /// The results schema of everything in the directory.
    pub schema: String,
    pub run_id: String,
    pub name: String,
    /// The config file the run was started from (absolute since schema 2.10.0).
    pub config_file: PathBuf,
    /// That file's text as the run read it (schema 2.10.0): the results
    /// directory alone is enough to run a cell again, from any folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_text: Option<String>,
    pub created_unix_ms: u64,
    /// The commit of the git checkout holding the config file, `+dirty`
    /// appended where its tracked files had changes; absent outside a
    /// checkout, or without git (schema 2.11.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_commit: Option<String>,
    /// Where rank 0 ran.
    pub environment: Environment,
    /// Every plugin the run loaded, with its SHA-256.
    pub plugins: Vec<PluginUse>,
    /// The config without its matrix, every default filled in.
    pub base: serde_json::Map<String, serde_json::Value>,
    /// The swept keys and their values, in the order written.
    pub axes: Vec<Axis>,
    /// Every cell of the run, in order.
    pub cells: Vec<RunCell>,
    /// `benchkit run --mock`: every figure in the directory is invented.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mock: bool,
    /// The slice of the matrix this run holds (`--slice`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<SliceRecord>,
    /// The slices `benchkit merge` joined into this run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<MergedSlice>,
}

/// One cell of `run.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct RunCell {
    /// Position in the run, from 0.
    pub index: usize,
    /// `key=value` pairs of the swept keys, e.g. `batch_size=32,depth=18`.
    pub id: String,
    /// File-name form of the id (`cells/<slug>.json`), unique in the run.
    pub slug: String,
    /// Swept key → this cell's value.
    pub axes: serde_json::Map<String, serde_json::Value>,
    /// The cell's resolved config.
    pub plan: serde_json::Map<String, serde_json::Value>,
}

/// What `run.json` says of a slice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct SliceRecord {
    /// Slice `index` (from 0) of `count`: the cells at positions `p` with
    /// `p mod count = index`.
    pub index: usize,
    pub count: usize,
    /// Where the slice was chosen: `--slice 1/3`, or the variables read.
    pub from: String,
    /// SHA-256 of the config file's bytes.
    pub config_sha256: String,
    /// Every cell of the whole matrix, in order, by id.
    pub matrix: Vec<String>,
}

impl SliceRecord {
    /// The cell ids of `matrix` this slice owns.
    pub fn owned(&self) -> impl Iterator<Item = &str> {
        self.matrix
            .iter()
            .enumerate()
            .filter(|(p, _)| p % self.count == self.index)
            .map(|(_, id)| id.as_str())
    }
}

/// A slice a merged run was joined from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct MergedSlice {
    pub dir: PathBuf,
    pub run_id: String,
    pub index: usize,
    pub count: usize,
    /// The host it ran on.
    pub hostname: String,
    /// Its cells.
    pub cells: Vec<String>,
}
