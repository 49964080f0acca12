//! What the step loop records.

use super::phases::PhaseSeconds;
pub use benchkit_schema::EpochRecord;
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
    /// A profiled step's seconds per phase (they add up to `total_s`).
    pub phases: Option<PhaseSeconds>,
}

impl StepRecord {
    pub fn total_s(&self) -> f64 {
        self.data_wait_s + self.compute_s
    }
}

/// The steps the headline figures come from: with `profile = true`, the
/// plain steps between the profiled ones (all of them when none is plain),
/// so that throughput and step times carry no profiling cost.
pub fn headline(steps: &[StepRecord]) -> Vec<StepRecord> {
    let plain: Vec<StepRecord> = steps.iter().filter(|s| s.phases.is_none()).copied().collect();
    if plain.is_empty() {
        steps.to_vec()
    } else {
        plain
    }
}

/// The mean time of the plain (unprofiled) steps among `steps`; NaN with none.
pub fn plain_step_s(steps: &[StepRecord]) -> f64 {
    let plain: Vec<f64> = steps.iter().filter(|s| s.phases.is_none()).map(StepRecord::total_s).collect();
    if plain.is_empty() {
        f64::NAN
    } else {
        plain.iter().sum::<f64>() / plain.len() as f64
    }
}

/// The profiled steps among `steps`: how many, and their seconds per phase summed.
pub fn phase_sums(steps: &[StepRecord]) -> (usize, PhaseSeconds) {
    let mut sums = [0.0; 7];
    let mut count = 0;
    for phases in steps.iter().filter_map(|s| s.phases) {
        count += 1;
        for (sum, s) in sums.iter_mut().zip(phases) {
            *sum += s;
        }
    }
    (count, sums)
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
    /// This process's peak resident memory, in MiB, where the system says.
    pub peak_rss_mib: Option<f64>,
    /// A pipeline cell's stages and their measured time.
    pub pipeline: Option<benchkit_schema::PipelineReport>,
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
    /// The process's peak resident memory, in MiB (NaN where unknown).
    pub peak_rss_mib: f64,
    /// Profiled steps, and their seconds per phase summed (`profile = true`).
    pub profiled_steps: usize,
    pub phase_s: PhaseSeconds,
    /// The mean plain step between them (NaN with none).
    pub plain_step_s: f64,
}
