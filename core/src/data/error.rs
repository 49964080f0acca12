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

    /// A checksum or structure error inside a file.
    #[error("{path}: at byte {offset}: {message}")]
    Damaged { path: PathBuf, offset: u64, message: String },

    #[error("no {what} in {dir}: looked for {tried}")]
    Missing { dir: PathBuf, what: String, tried: String },

    /// A sample that cannot be decoded; `on_corrupt = "skip"` skips these.
    #[error("{at}: corrupt sample: {message}")]
    Corrupt { at: String, message: String },

    /// A sample that decodes but does not fit the dataset.
    #[error("{at}: {message}")]
    Sample { at: String, message: String },

    /// A transform that failed; a plugin's error when the transform is one
    /// (downcast to name the plugin at fault).
    #[error("{0}")]
    Transform(Box<dyn std::error::Error + Send + Sync + 'static>),

    /// Input past one of [`crate::bounds`]' lines.
    #[error(transparent)]
    Bound(#[from] crate::bounds::BoundError),
}

impl DataError {
    /// A sample whose stored bytes are bad (cannot be decoded, fail a CRC,
    /// are cut off, lack a feature): what `on_corrupt = "skip"` leaves out.
    pub fn is_damaged_sample(&self) -> bool {
        matches!(self, DataError::Corrupt { .. } | DataError::Damaged { .. } | DataError::Truncated { .. })
    }
}
