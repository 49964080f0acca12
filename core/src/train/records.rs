//! What the step loop records.

use serde::{Deserialize, Serialize};

/// One training step: waiting for the batch, then everything else.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct StepRecord {
    pub epoch: u32,
    pub data_wait_s: f64,
    /// From the batch's arrival to the end of the optimizer step.
    pub compute_s: f64,
    /// Of `compute_s`, the slowest replica's gradient all-reduce (0 with one device).
    pub all_reduce_s: f64,
    pub images: usize,
}

impl StepRecord {
    pub fn total_s(&self) -> f64 {
        self.data_wait_s + self.compute_s
    }
}

/// One epoch: training figures and the test evaluation after it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EpochRecord {
    /// 1-based.
    pub epoch: u32,
    pub steps: usize,
    pub images: usize,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub train_loss: f64,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub train_accuracy: f64,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub test_loss: f64,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub test_accuracy: f64,
    /// Training images per second over this epoch's measured (non-warm-up) steps.
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub images_per_s: f64,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub train_s: f64,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub eval_s: f64,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub lr_end: f64,
    /// Wall-clock time (Unix milliseconds) when the evaluation ended.
    pub end_unix_ms: u64,
    /// Task-specific test figures beyond accuracy: for captioning
    /// `exact_match` and `levenshtein` (mean edit distance) of greedy captions.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub metrics: std::collections::BTreeMap<String, f64>,
}

/// Everything a cell's training produced.
#[derive(Clone, Debug)]
pub struct TrainOutcome {
    /// Every step, warm-up included (the first `warmup_steps`).
    pub steps: Vec<StepRecord>,
    pub warmup_steps: usize,
    pub epochs: Vec<EpochRecord>,
    pub num_params: usize,
    /// Gradient bytes each replica all-reduces per step (0 with one replica).
    pub gradient_bytes: usize,
    /// Each process's measured figures, rank order (one entry for a single process).
    pub ranks: Vec<RankFigures>,
    /// Whether every replica of every process ended with the same
    /// parameters; absent with a single replica.
    pub replicas_agree: Option<bool>,
    /// GPU utilisation, memory and power over the cell (CUDA cells).
    pub gpu: Option<crate::measure::GpuReport>,
}

/// One process's measured (post-warm-up) steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RankFigures {
    pub rank: usize,
    pub steps: usize,
    pub images: usize,
    pub step_s: f64,
    pub data_wait_s: f64,
    pub all_reduce_s: f64,
}
