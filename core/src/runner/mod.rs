//! Runs a config's matrix: every cell, every repeat, each in its own
//! process (a crash, an out-of-memory kill or a time-out in one never takes
//! down the run or skews the next). Four jobs, a folder each:
//! - [`schedule`]: the run itself: the matrix opened (new, resumed or a
//!   slice), each repeat attempted in cell processes and watched, every
//!   event recorded before reporting it, slices merged, a stored run
//!   reported again;
//! - [`cell`]: the cell's own process: its plugins, data and graph prepared
//!   and checked, then trained;
//! - [`store`]: the results directory, written and read back, and the names
//!   in it;
//! - [`ranks`]: the processes of a multi-process cell: where each stands,
//!   started on this machine, or met and watched across machines.
//!
//! [`message`] holds what the parent and a cell process say to each other.
//! The runner must never lose a measured result: every event is written to
//! `events.jsonl` before any reporter sees it.

pub mod cell;
pub mod message;
pub mod ranks;
pub mod schedule;
pub mod store;

pub use cell::prepare::{load_plugins, loader_config, open_data, prepare, Prepared};
pub use cell::{run_cell, serve};
pub use ranks::rendezvous::Member;
pub use schedule::merge::{merge, Merged};
pub use schedule::rerender::{rerender, Rerendered};
pub use schedule::{run, run_with};
pub use store::artifacts::{write_artifacts, MAX_ARTIFACTS};
pub use store::read::{load_cells, load_pair, load_run_cells, read_run};
pub use store::{write_atomic, RunRecord, Store, StoredRun};

use crate::config::ConfigError;
use crate::data::DataError;
use crate::model::GraphError;
use crate::plugin::PluginError;
use crate::report::{CellSummary, ReportError};
use crate::train::TrainError;
use std::path::PathBuf;

/// Why the runner stopped: a run, one repeat in its cell process, or a
/// command that prepares cells without training them.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error(transparent)]
    Plugin(#[from] PluginError),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Bound(#[from] crate::bounds::BoundError),
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Launcher(#[from] crate::config::LaunchEnvError),
    #[error(transparent)]
    Export(#[from] crate::export::ExportError),
    /// One cell of a config could not be prepared.
    #[error("cell {cell}")]
    Cell {
        cell: String,
        #[source]
        source: Box<RunnerError>,
    },
}

/// What to run.
#[derive(Clone, Debug)]
pub enum RunSource {
    /// A config file: a new run.
    Config(PathBuf),
    /// A results directory: finish the cells an earlier run did not.
    Resume(PathBuf),
}

/// How `run` presents itself.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Results directory of a new run [default: `results/<name>-<UTC time>`].
    pub output: Option<PathBuf>,
    /// Draw progress bars on stderr.
    pub progress: bool,
    /// Print nothing on stderr while running.
    pub quiet: bool,
    /// Cell whose images/s the others are compared with.
    pub reference: Option<String>,
    /// The program that runs a cell (`<program> cell`) [default: this executable].
    pub cell_program: Option<PathBuf>,
    /// Train nothing: deterministic figures from [`schedule::executor::Mock`].
    pub mock: bool,
    /// The launcher's environment, which fills the `[distributed]` keys a
    /// config leaves out.
    pub launcher: crate::config::LaunchEnv,
    /// Run only this slice of the matrix (`--slice I/N`).
    pub slice: Option<schedule::slice::SliceSpec>,
}

/// What a run produced.
pub struct RunSummary {
    pub run_dir: PathBuf,
    pub summaries: Vec<CellSummary>,
    /// The results table.
    pub table: String,
    pub artifacts: Vec<PathBuf>,
    /// Reporters that failed; their failure did not affect the rest.
    pub reporter_errors: Vec<ReportError>,
    /// Cells that failed.
    pub failed: usize,
    /// Cells finished by an earlier run and not run again.
    pub resumed: usize,
}

/// `YYYYmmdd-HHMMSS` (UTC) of Unix time `ms`.
pub(crate) fn timestamp(ms: u64) -> String {
    let [year, month, day, h, m, sec] = crate::measure::env::utc(i64::try_from(ms).unwrap_or(i64::MAX));
    format!("{year:04}{month:02}{day:02}-{h:02}{m:02}{sec:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(timestamp(0), "19700101-000000");
        assert_eq!(timestamp(951_782_400_000 + 3_723_000), "20000229-010203");
        assert_eq!(timestamp(1_795_000_000_000), "20261118-110640");
    }
}
