//! Training errors.

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Data(#[from] crate::data::DataError),
    #[error("backend: {0}")]
    Backend(String),
    #[error("{0}")]
    Setup(String),
    /// Another process of the cell died or could not be reached mid-training:
    /// a transient failure, which trying again may not meet.
    #[error("lost a peer: {0}")]
    LostPeer(String),
}

/// What every message about a peer lost in a collective says, so that the
/// replica that reads it from another thread can tell it apart.
pub const LOST_PEER: &str = "another process died, or a peer became unreachable";

impl TrainError {
    /// A replica thread's failure `message`: a lost peer when it says so.
    pub fn of_replica(message: String) -> Self {
        if message.contains(LOST_PEER) {
            TrainError::LostPeer(message)
        } else {
            TrainError::Backend(message)
        }
    }
}
