//! Data errors: each names the file (and byte offset or sample) at fault.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },

    #[error("{path}: {message}")]
    Format { path: PathBuf, message: String },

    #[error("{path}: truncated at byte {offset}: {message}")]
    Truncated { path: PathBuf, offset: u64, message: String },

    #[error("no {what} in {dir}: looked for {tried}")]
    Missing { dir: PathBuf, what: String, tried: String },

    #[error("{0}")]
    Plugin(#[from] crate::plugin::PluginError),
}
