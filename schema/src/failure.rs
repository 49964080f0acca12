//! Why a repeat of a cell did not finish: defined once, and carried whole
//! by the `cell-failed` event, by `cells/<slug>.json` and by the message a
//! cell process sends its parent.

use crate::event::FailureKind;
use serde::{Deserialize, Serialize};

/// Why one repeat of a cell did not finish. Plugin text in it is already
/// cleaned of control sequences and bounded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Failure {
    pub reason: String,
    /// The plugin at fault, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// The plugin call that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// The last lines the cell process wrote to stderr, when it died
    /// without saying why (a signal, an abort), cleaned of control sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stderr_tail: Vec<String>,
    /// Whether trying again could end otherwise.
    #[serde(default)]
    pub kind: FailureKind,
    /// The attempt was tried again (a transient failure with retries left).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retried: bool,
    /// The last phase the cell process reached: preparing, building the
    /// network, a training step, evaluating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

impl Failure {
    /// A deterministic failure no plugin is named in.
    pub fn plain(reason: impl Into<String>) -> Self {
        Self { reason: reason.into(), ..Self::default() }
    }

    /// A transient failure (killed, timed out, a lost peer): worth trying again.
    pub fn transient(reason: impl Into<String>) -> Self {
        Self { reason: reason.into(), kind: FailureKind::Transient, ..Self::default() }
    }
}

/// A `cell-failed` event reads as its failure: `event.reason`, `event.kind`
/// and the rest, as before the failure was one type.
impl std::ops::Deref for crate::CellFailed {
    type Target = Failure;

    fn deref(&self) -> &Failure {
        &self.failure
    }
}

/// A failed repeat of a cell record reads as its failure, as the event does.
impl std::ops::Deref for crate::FailedRepeat {
    type Target = Failure;

    fn deref(&self) -> &Failure {
        &self.failure
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CellFailed, CellRecord, Event};

    /// The event and the record carry the failure's fields at their own top
    /// level, as results written before the type was shared have them.
    #[test]
    fn a_failure_reads_the_same_in_an_event_and_a_record() {
        let line = r#"{"event":"cell-failed","time_ms":5,"cell":"c","repeat":2,"reason":"oom","plugin":"builtin:x","kind":"transient","retried":true}"#;
        let stamped: crate::Stamped = serde_json::from_str(line).unwrap();
        let Event::CellFailed(CellFailed { repeat, failure, .. }) = &stamped.event else {
            panic!("{stamped:?}")
        };
        assert_eq!((*repeat, failure.reason.as_str(), failure.kind), (2, "oom", FailureKind::Transient));
        assert_eq!((failure.plugin.as_deref(), failure.retried), (Some("builtin:x"), true));
        let back = serde_json::to_value(&stamped).unwrap();
        assert_eq!(back, serde_json::from_str::<serde_json::Value>(line).unwrap());

        let record = r#"{"index":0,"cell":"c","axes":{},"repeats_asked":1,"repeats":[],"summary":null,
            "failures":[{"repeat":1,"reason":"killed","wall_s":1.5,"stderr_tail":["a"],"phase":"step"}]}"#;
        let record: CellRecord = serde_json::from_str(record).unwrap();
        let failed = &record.failures[0];
        assert_eq!((failed.repeat, failed.wall_s, failed.reason.as_str()), (1, 1.5, "killed"));
        assert_eq!((failed.failure.stderr_tail.len(), failed.failure.phase.as_deref()), (1, Some("step")));
        assert_eq!(failed.failure.kind, FailureKind::Deterministic);
    }
}
