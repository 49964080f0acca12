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

impl TrainError {
    /// The same error, its message led by `context` (e.g. `replica 1`);
    /// a data error keeps its own, which names the file or plugin.
    pub fn within(self, context: &str) -> Self {
        match self {
            TrainError::Backend(m) => TrainError::Backend(format!("{context}: {m}")),
            TrainError::Setup(m) => TrainError::Setup(format!("{context}: {m}")),
            TrainError::LostPeer(m) => TrainError::LostPeer(format!("{context}: {m}")),
            data @ TrainError::Data(_) => data,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_leads_the_message_and_keeps_the_kind() {
        let lost = TrainError::LostPeer("the all-reduce broke off".into()).within("replica 1");
        assert!(
            matches!(&lost, TrainError::LostPeer(m) if m == "replica 1: the all-reduce broke off"),
            "{lost}"
        );
        let backend = TrainError::Backend("x".into()).within("replica 0");
        assert_eq!(backend.to_string(), "backend: replica 0: x");
    }
}
