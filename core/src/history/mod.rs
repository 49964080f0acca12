//! `benchkit history`: every run added to one SQLite database, each cell a
//! point of a series (the same config, matrix position aside, on the same
//! kind of machine), with the code's commit and the engines' versions it
//! ran with; each series' change points found against its own noise
//! ([`change`]); and the newest run checked against its series' recent
//! level, for a nightly job to gate on.

mod add;
pub mod change;
mod key;
mod parquet;
pub mod series;
mod store;

pub use add::{add, Added};
pub use series::{Point, Series};
pub use store::{APPLICATION_ID, LAYOUT};

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The database file cannot be used; it is left as it is.
    #[error("the history {}: {why}", path.display())]
    Refused { path: PathBuf, why: String },
    /// A results directory cannot be added; nothing of it was.
    #[error("{}: {why}", dir.display())]
    NotAdded { dir: PathBuf, why: String },
}

/// The history database: `--db` where given, else `$BENCHKIT_HISTORY`,
/// else `$XDG_DATA_HOME/benchkit/history.sqlite`, else
/// `~/.local/share/benchkit/history.sqlite`.
pub fn default_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BENCHKIT_HISTORY").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let data =
        std::env::var_os("XDG_DATA_HOME").filter(|p| !p.is_empty()).map(PathBuf::from).or_else(|| {
            std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| Path::new(&h).join(".local/share"))
        })?;
    Some(data.join("benchkit").join("history.sqlite"))
}

/// An open history.
pub struct History {
    db: rusqlite::Connection,
    path: PathBuf,
}

impl History {
    /// Open the history at `path`, creating it where there is none ([`store::open`]).
    pub fn open(path: &Path) -> Result<Self, HistoryError> {
        Ok(Self { db: store::open(path, store::Missing::Create)?, path: path.to_path_buf() })
    }

    /// Open the history at `path`, which must exist: reading a history
    /// never makes one (a mistyped path would read as no series at all).
    pub fn open_existing(path: &Path) -> Result<Self, HistoryError> {
        Ok(Self { db: store::open(path, store::Missing::Refuse)?, path: path.to_path_buf() })
    }

    /// `e` as refused by this history, naming its file.
    fn failed(&self, e: rusqlite::Error) -> HistoryError {
        HistoryError::Refused { path: self.path.clone(), why: e.to_string() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}
