//! Runs a config's matrix: every cell, every repeat, each in its own
//! process (a crash, an out-of-memory kill or a time-out in one never takes
//! down the run or skews the next). The parts:
//! - [`prepare`]: a cell's plugins, data and graph, loaded and checked;
//! - `batch_search`: the trial cells of `batch_size = "max"`;
//! - `launch`: where each process of a multi-process cell stands;
//! - `attempt`: cell processes started, watched and stopped;
//! - `rendezvous` and `peers`: the ranks of an external launch meet, then watch each other;
//! - [`executor`]: who runs a repeat (processes, or a deterministic mock);
//! - `schedule`: the run itself, recording every event before reporting it;
//! - [`replay`]: a run read back from its events (resume, `benchkit report`);
//! - `cell`: what a cell process does;
//! - `store` and `artifacts`: the results directory, whose names [`layout`] holds;
//! - [`slice`] and `merge`: a matrix split over machines, and joined again.
//!
//! The runner must never lose a measured result: every event is written to
//! `events.jsonl` before any reporter sees it.

pub mod artifacts;
mod attempt;
mod batch_search;
mod cell;
pub mod collective;
pub mod executor;
pub(crate) mod launch;
pub mod layout;
mod merge;
mod open;
mod peers;
pub mod prepare;
mod progress;
mod ranks;
mod rendezvous;
pub mod replay;
mod rerender;
mod schedule;
pub mod slice;
mod store;
mod stored;
pub mod study_data;

pub use artifacts::{write_artifacts, MAX_ARTIFACTS};
pub use cell::{run_cell, serve, CellMessage, CellOrder, FailureCause, MARK};
pub use merge::{merge, Merged};
pub use prepare::{load_plugins, loader_config, open_data, prepare, Prepared};
pub use rendezvous::Member;
pub use rerender::{rerender, Rerendered};
pub use schedule::{run, run_with};
pub use store::{write_atomic, CellRecord, Failure, RunRecord, Store, StoredRun};
pub use stored::{load_cells, load_pair, load_run_cells, read_run};

use crate::config::ConfigError;
use crate::data::DataError;
use crate::model::GraphError;
use crate::plugin::PluginError;
use crate::report::{CellSummary, ReportError};
use crate::train::TrainError;
use std::path::PathBuf;

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
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
    /// Train nothing: deterministic figures from [`executor::Mock`].
    pub mock: bool,
    /// The launcher's environment, which fills the `[distributed]` keys a
    /// config leaves out.
    pub launcher: crate::config::LaunchEnv,
    /// Run only this slice of the matrix (`--slice I/N`).
    pub slice: Option<slice::SliceSpec>,
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
    let secs = ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}{month:02}{day:02}-{:02}{:02}{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
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
