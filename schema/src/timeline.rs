//! What each rank did over time in one repeat of a cell: its traced steps
//! (their data wait, phases, each replica's work, each gradient bucket's
//! all-reduce from start to end), its loader's batches stage by stage, and
//! its process's CPU and memory at each traced step. Times are whole
//! microseconds from the rank's own origin, which `origin_unix_us` places
//! on the wall clock (ranks on several machines line up as far as their
//! clocks agree). The `timeline` reporter draws it as a Chrome trace.

use crate::Phase;
use serde::{Deserialize, Serialize};

/// The most steps a rank may trace (`max_steps`): about 1 KiB each in
/// the `timeline` event with a few buckets, so at most some 100 MiB a rank.
pub const MAX_TRACED_STEPS: usize = 100_000;

/// Which steps a rank traces: every step of the first `first_steps` of each
/// epoch, then one in `every`, at most `max_steps` in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct TraceWindow {
    pub first_steps: usize,
    pub every: usize,
    pub max_steps: usize,
}

impl Default for TraceWindow {
    fn default() -> Self {
        Self { first_steps: 50, every: 10, max_steps: 1000 }
    }
}

impl TraceWindow {
    /// Whether the step `in_epoch` steps (0-based) into its epoch is traced,
    /// with `traced` steps traced before it.
    pub fn wants(&self, in_epoch: usize, traced: usize) -> bool {
        traced < self.max_steps
            && (in_epoch < self.first_steps
                || (in_epoch - self.first_steps).is_multiple_of(self.every.max(1)))
    }
}

/// One repeat of one cell, every rank's timeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct CellTimeline {
    pub cell: String,
    /// 1-based.
    pub repeat: u32,
    pub window: TraceWindow,
    /// Rank order; one for a single process.
    pub ranks: Vec<RankTimeline>,
}

/// One rank's timeline.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct RankTimeline {
    pub rank: usize,
    pub world_size: usize,
    /// The machine it ran on, as it names itself.
    pub host: String,
    /// Its origin on the wall clock, in Unix microseconds.
    pub origin_unix_us: u64,
    /// Steps it took, warm-up included; `steps` holds the traced ones.
    pub steps_taken: usize,
    /// Its warm-up steps (the first ones, left out of the figures).
    pub warmup_steps: usize,
    /// Replicas in its process.
    pub replicas: usize,
    /// Its loader's worker threads (0: the step loop's own thread).
    pub loader_workers: usize,
    pub steps: Vec<StepTrace>,
    /// The loader's training batches whose steps were traced.
    pub batches: Vec<BatchTrace>,
}

/// One traced step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct StepTrace {
    /// 0-based over the cell, warm-up included.
    pub step: usize,
    pub epoch: u32,
    /// When it began to wait for its batch.
    pub start_us: u64,
    pub data_wait_us: u64,
    /// From the batch's arrival to the end of the optimizer step: the step
    /// is `data_wait_us + compute_us` long.
    pub compute_us: u64,
    /// Of `compute_us`, the wait for the gradient all-reduce after the
    /// backward pass (the slowest replica's).
    pub exposed_communication_us: u64,
    /// A profiled step's phases in step order; they add up to the step.
    pub phases: Vec<PhaseTrace>,
    /// Each replica thread's work on the step (several replicas or processes).
    pub replicas: Vec<ReplicaTrace>,
    /// Each gradient bucket's all-reduce on the communication thread, in the order sent.
    pub buckets: Vec<BucketTrace>,
    /// An op-profiled step's ops (`[profile] ops = true`), in the order
    /// they ran, consecutive from the batch's arrival; the first
    /// [`MAX_OP_TRACED_STEPS`] such steps a rank traces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<OpTrace>,
    /// The process's CPU time over the step's wall time, in percent of one core.
    pub cpu_pct: Option<f64>,
    /// Its resident memory at the step's end, in MiB.
    pub rss_mib: Option<f64>,
}

/// The most op-profiled steps whose ops a rank traces: a ResNet-50 step
/// is some 350 ops, about 15 KiB of the `timeline` event.
pub const MAX_OP_TRACED_STEPS: usize = 20;

/// One op's forward or backward pass in an op-profiled step, or a part of
/// the step outside the graph (`loss`, `optimizer`, `host-to-device`,
/// `not attributed`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct OpTrace {
    /// The graph node's name, or the part's.
    pub name: String,
    /// `true` for a backward pass.
    pub backward: bool,
    pub us: u64,
}

/// One phase of a profiled step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct PhaseTrace {
    pub phase: Phase,
    pub us: u64,
}

/// One replica's part of a step: its work until its gradients were ready,
/// its wait for their all-reduce, then the optimizer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ReplicaTrace {
    pub replica: usize,
    pub start_us: u64,
    /// When the device finished its backward pass.
    pub backward_end_us: u64,
    /// When the all-reduced gradients were back.
    pub reduced_us: u64,
    pub end_us: u64,
}

/// One gradient bucket's all-reduce, from when the communication thread
/// took it up to when its sum was back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct BucketTrace {
    pub bucket: usize,
    pub start_us: u64,
    pub end_us: u64,
    pub bytes: u64,
}

/// One training batch a loader worker built: when, and its time in each
/// stage, summed over its samples (read and decode alternate sample by
/// sample; the transform runs once on the whole batch; `batch` is the rest:
/// collating targets and handing it over).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct BatchTrace {
    /// The worker thread (0 with none: the step loop's own thread).
    pub worker: usize,
    pub epoch: u32,
    /// The batch's place in its epoch.
    pub batch: usize,
    pub start_us: u64,
    pub end_us: u64,
    pub read_us: u64,
    pub decode_us: u64,
    pub transform_us: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_traces_the_first_steps_then_one_in_every() {
        let w = TraceWindow { first_steps: 3, every: 4, max_steps: 6 };
        let traced: Vec<usize> = (0..20).filter(|&i| w.wants(i, 0)).collect();
        assert_eq!(traced, [0, 1, 2, 3, 7, 11, 15, 19]);
        assert!(!w.wants(0, 6), "at most max_steps");
        assert!(TraceWindow { every: 0, ..w }.wants(5, 0), "every = 0 reads as every step");
    }
}
