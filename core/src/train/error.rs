//! Training errors.

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Data(#[from] crate::data::DataError),
    #[error("backend: {0}")]
    Backend(String),
    #[error("{0}")]
    Setup(String),
}
