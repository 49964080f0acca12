//! What the step loop records: each step and epoch, and the outcome; the
//! clocks that time a step (`phases`, and `fence` for the end of a
//! backward pass); what one step of a placement gives back (`Stepped`);
//! the steps whose ops were timed (`ops`);
//! and every rank's figures and timeline gathered to each ([`Gather`],
//! with `packing` carrying them as floats).

pub(super) mod fence;
pub(crate) mod ops;
mod packing;
pub(super) mod phases;
pub(super) mod rank_figures;
mod stepped;
pub(super) mod timeline;

pub use benchkit_schema::EpochRecord;
pub use fence::exposed_s;
use phases::PhaseSeconds;
use serde::{Deserialize, Serialize};
use std::time::Instant;
pub(crate) use stepped::Stepped;

/// One training step: waiting for the batch, then everything else.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct StepRecord {
    pub epoch: u32,
    pub data_wait_s: f64,
    /// From the batch's arrival to the end of the optimizer step.
    pub compute_s: f64,
    /// Of `compute_s`, the slowest replica's wait for its gradient
    /// all-reduce after the device finished the backward pass (0 with one
    /// device; [`crate::train::exposed_s`]).
    pub exposed_communication_s: f64,
    /// The slowest replica's all-reduce seconds on the step's gradients,
    /// those hidden behind the backward pass included.
    pub communication_s: f64,
    pub images: usize,
    /// A profiled step's seconds per phase (they add up to `total_s`).
    pub phases: Option<PhaseSeconds>,
}

impl StepRecord {
    pub fn total_s(&self) -> f64 {
        self.data_wait_s + self.compute_s
    }
}

/// Times the consecutive steps of a training pass: each step's data wait
/// starts where the step before it ended (the first, where its epoch's
/// batches were asked for), so that no time between steps goes untimed.
/// The work still queued on the devices when the pass ends is charged to
/// its last step by the step loop (`Trainer::pass`).
pub struct StepTimer {
    last_end: Instant,
}

impl StepTimer {
    /// A timer whose first step starts waiting at `at`.
    pub fn start(at: Instant) -> Self {
        Self { last_end: at }
    }

    /// The next step starts waiting at `at`, not where the last one ended:
    /// benchkit's own bookkeeping between two steps (reading a JIT backend's
    /// kernel cache after a warm-up step) is no step's time.
    pub fn skip_to(&mut self, at: Instant) {
        self.last_end = at;
    }

    /// The step whose batch arrived at `arrived` and that ended at `ended`:
    /// when it started waiting, its data wait and its compute, in seconds.
    /// The next step starts waiting at `ended`.
    ///
    /// Formula: data wait = t(batch arrived) − t(last step ended); compute = t(step ended) −
    /// t(batch arrived).
    pub fn split(&mut self, arrived: Instant, ended: Instant) -> (Instant, f64, f64) {
        let waited = self.last_end;
        self.last_end = ended;
        let seconds = |from: Instant, to: Instant| to.saturating_duration_since(from).as_secs_f64();
        (waited, seconds(waited, arrived), seconds(arrived, ended))
    }
}

/// The images/s of epoch `epoch` over its measured steps: `steps` are all
/// of a process's steps so far, the first `warmup_steps` of them warm-up,
/// and of a profiled epoch only the plain steps count ([`headline`]); NaN
/// with no measured step.
///
/// Formula: epoch images/s = images / Σ step seconds over the epoch's measured steps.
pub fn epoch_images_per_s(steps: &[StepRecord], warmup_steps: usize, epoch: u32) -> f64 {
    let in_epoch: Vec<StepRecord> =
        steps.iter().skip(warmup_steps).filter(|s| s.epoch == epoch).copied().collect();
    let measured = headline(&in_epoch);
    let seconds: f64 = measured.iter().map(StepRecord::total_s).sum();
    let images: usize = measured.iter().map(|s| s.images).sum();
    if seconds > 0.0 {
        images as f64 / seconds
    } else {
        f64::NAN
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

/// A machine's id ([`crate::measure::env::machine_id`]) hashed to 24 bits
/// (FNV-1a folded), exact in the f32 the ranks gather their figures in:
/// processes with the same tag share a machine and its RAPL meter. Two of
/// n machines share a tag with a chance of about n² / 2²⁵.
pub fn machine_tag(machine_id: &str) -> u32 {
    let h = crate::hash::fnv1a(machine_id.as_bytes());
    ((h ^ (h >> 24) ^ (h >> 48)) & 0x00ff_ffff) as u32
}

/// This machine's host name, cut to at most [`HOST_BYTES`] bytes at a
/// character boundary.
pub fn host_name() -> String {
    let mut name = crate::measure::env::hostname();
    let mut end = name.len().min(HOST_BYTES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name.truncate(end);
    name
}

/// Everything a cell's training produced.
#[derive(Clone, Debug)]
pub struct TrainOutcome {
    /// Every step, warm-up included (the first `warmup_steps`).
    pub steps: Vec<StepRecord>,
    pub warmup_steps: usize,
    /// This process's rank (0 for a single process).
    pub rank: usize,
    pub epochs: Vec<EpochRecord>,
    pub num_params: usize,
    /// Gradient bytes each replica all-reduces per step (0 with one replica).
    pub gradient_bytes: usize,
    /// The bytes of each gradient bucket, in the order they are sent
    /// (none where the gradients travel fused in one all-reduce).
    pub bucket_bytes: Vec<u64>,
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
    /// The CPU threads the backend computed with (none where a GPU computes).
    pub threads: Option<usize>,
    /// Every rank's timeline, rank order (with a trace window; else none).
    pub timeline: Vec<benchkit_schema::RankTimeline>,
    /// Why warm-up ended.
    pub warmup_end: benchkit_schema::WarmupEnd,
    /// With a kernel cache: the kernels compiled and tuned in warm-up and
    /// in the measured steps.
    pub kernels: Option<(crate::backend::kernels::KernelCount, crate::backend::kernels::KernelCount)>,
    /// A JIT backend's report of them, with its device and cache.
    pub jit: Option<benchkit_schema::JitReport>,
    /// The op-timed steps' mean, op by op (`[profile] ops = true`); its
    /// engine is named by the caller.
    pub ops: Option<benchkit_schema::OpProfile>,
}

impl TrainOutcome {
    /// A single process's outcome of `steps` (the first `warmup_steps` of
    /// them warm-up) and `epochs`, with nothing else measured.
    pub fn of_steps(steps: Vec<StepRecord>, warmup_steps: usize, epochs: Vec<EpochRecord>) -> Self {
        Self {
            steps,
            warmup_steps,
            rank: 0,
            epochs,
            num_params: 0,
            gradient_bytes: 0,
            bucket_bytes: Vec::new(),
            ranks: Vec::new(),
            replicas_agree: None,
            gpu: None,
            peak_rss_mib: None,
            pipeline: None,
            threads: None,
            timeline: Vec::new(),
            warmup_end: benchkit_schema::WarmupEnd::Fixed,
            kernels: None,
            jit: None,
            ops: None,
        }
    }
}

/// One process's measured (post-warm-up) steps, and what it trained in all.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RankFigures {
    pub rank: usize,
    pub steps: usize,
    pub images: usize,
    /// Every step's images, warm-up included.
    pub trained_images: usize,
    /// Training steps, warm-up included, and those whose batch held fewer
    /// images than the process's share of the batch, with the images they lacked.
    pub all_steps: usize,
    pub short_steps: usize,
    pub images_missing: usize,
    /// Distinct training samples of its share the loader left out as
    /// undecodable (`data.on_corrupt = "skip"`), each once over every epoch.
    pub skipped_train: usize,
    /// The machine the process ran on, as [`machine_tag`] names it.
    pub machine: u32,
    pub step_s: f64,
    pub data_wait_s: f64,
    pub exposed_communication_s: f64,
    /// The process's peak resident memory, in MiB (NaN where unknown).
    pub peak_rss_mib: f64,
    /// Profiled steps, and their seconds per phase summed (`profile = true`).
    pub profiled_steps: usize,
    pub phase_s: PhaseSeconds,
    /// The mean plain step between them (NaN with none).
    pub plain_step_s: f64,
    /// The host the process ran on, as it names itself (at most
    /// [`HOST_BYTES`] bytes).
    pub host: String,
    /// Its work over the headline steps: their count, the median and noise
    /// ([`benchkit_schema::Spread::sigma`]) of each step's
    /// compute less its exposed communication, and the median exposed
    /// communication, in seconds.
    pub work_steps: usize,
    pub work_p50_s: f64,
    pub work_noise_s: f64,
    pub exposed_communication_p50_s: f64,
    /// The median data wait; the median and noise of each step's data
    /// wait plus its work (its arrival at the all-reduce); the median of
    /// its all-reduces, overlapped or not, in seconds.
    pub data_wait_p50_s: f64,
    pub arrival_p50_s: f64,
    pub arrival_noise_s: f64,
    pub communication_p50_s: f64,
}

/// The longest host name the ranks gather; a longer one is cut at a
/// character boundary. Three bytes travel in a float.
pub const HOST_BYTES: usize = 63;
const _: () = assert!(HOST_BYTES.is_multiple_of(3));

/// The stretches (Unix milliseconds, start and end) in which `outcome`
/// trained its measured steps: each epoch's training pass, its warm-up
/// steps (a steady warm-up can outlast the first epoch) cut from its start;
/// evaluation and setup lie outside.
pub fn training_windows(outcome: &TrainOutcome) -> Vec<(f64, f64)> {
    let warm = |epoch: u32| -> f64 {
        outcome
            .steps
            .iter()
            .take(outcome.warmup_steps)
            .filter(|s| s.epoch == epoch)
            .map(StepRecord::total_s)
            .sum()
    };
    outcome
        .epochs
        .iter()
        .map(|e| {
            let end = e.end_unix_ms as f64 - 1e3 * e.eval_s;
            let start = end - 1e3 * e.train_s + 1e3 * warm(e.epoch);
            (start.min(end), end)
        })
        .collect()
}

/// Every peer's row of figures, gathered over the cell's replicas and
/// processes: what [`rank_figures::gather`] and [`timeline::gather`] send
/// through, and the model's placement provides.
pub(crate) trait Gather {
    /// Every peer's `row` (this process gives its own) followed by the
    /// fingerprint of its parameters: one row of `row.len() + 4` per peer,
    /// in peer order.
    fn gather(&mut self, row: Vec<f32>) -> Result<Vec<Vec<f32>>, crate::train::TrainError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_windows_leave_out_warm_up_and_evaluation() {
        let step = |epoch: u32| StepRecord {
            epoch,
            data_wait_s: 0.0,
            compute_s: 0.5,
            exposed_communication_s: 0.0,
            communication_s: 0.0,
            images: 8,
            phases: None,
        };
        let epoch = |epoch: u32, end_unix_ms| EpochRecord {
            epoch,
            steps: 4,
            images: 32,
            eval_images: 0,
            train_loss: 1.0,
            train_accuracy: 0.5,
            test_loss: 1.0,
            test_accuracy: 0.5,
            images_per_s: 16.0,
            train_s: 2.0,
            eval_s: 1.0,
            lr_end: 0.1,
            end_unix_ms,
            metrics: Default::default(),
            pr_curve: Vec::new(),
        };
        let steps: Vec<StepRecord> = [1, 1, 1, 1, 2, 2, 2, 2].map(step).to_vec();
        let epochs = vec![epoch(1, 10_000), epoch(2, 13_000)];
        let outcome = TrainOutcome::of_steps(steps.clone(), 2, epochs.clone());
        // Epoch 1 trained 7,000–9,000 ms, its first second warm-up; epoch 2 10,000–12,000.
        assert_eq!(training_windows(&outcome), [(8_000.0, 9_000.0), (10_000.0, 12_000.0)]);
        // A steady warm-up of 6 steps: all of epoch 1, and epoch 2's first second.
        let outcome = TrainOutcome::of_steps(steps, 6, epochs);
        assert_eq!(training_windows(&outcome), [(9_000.0, 9_000.0), (11_000.0, 12_000.0)]);
    }

    /// Three steps from 0 ms: a batch at 30 ms, the step done at 100; the
    /// next batch already there, done at 160; a batch at 200, done at 250.
    #[test]
    fn each_step_waits_from_the_end_of_the_one_before() {
        let start = Instant::now();
        let at = |ms: u64| start + std::time::Duration::from_millis(ms);
        let mut timer = StepTimer::start(start);
        let steps: Vec<(Instant, f64, f64)> =
            [(30, 100), (100, 160), (200, 250)].iter().map(|&(a, e)| timer.split(at(a), at(e))).collect();
        let close = |x: f64, want: f64| (x - want).abs() < 1e-12;
        for ((waited, wait, compute), (from, want_wait, want_compute)) in
            steps.iter().zip([(0, 0.030, 0.070), (100, 0.0, 0.060), (160, 0.040, 0.050)])
        {
            assert_eq!(*waited, at(from));
            assert!(close(*wait, want_wait) && close(*compute, want_compute), "{wait} {compute}");
        }
        let total: f64 = steps.iter().map(|(_, w, c)| w + c).sum();
        assert!(close(total, 0.250), "the steps tile the pass: {total}");
    }

    /// Two warm-up steps, then epoch 1: 8 images in 0.5 s, a profiled step
    /// of 8 in 2.0 s, 6 in 0.3 s; epoch 2: 8 in 0.25 s.
    #[test]
    fn an_epochs_images_per_s_counts_its_measured_plain_steps() {
        let step = |epoch, images, wait, compute, profiled: bool| StepRecord {
            epoch,
            data_wait_s: wait,
            compute_s: compute,
            exposed_communication_s: 0.0,
            communication_s: 0.0,
            images,
            phases: profiled.then_some([compute / 7.0; 7]),
        };
        let steps = [
            step(1, 8, 0.0, 1.0, false),
            step(1, 8, 0.0, 1.0, false),
            step(1, 8, 0.1, 0.4, false),
            step(1, 8, 0.0, 2.0, true),
            step(1, 6, 0.05, 0.25, false),
            step(2, 8, 0.05, 0.2, false),
        ];
        let close = |x: f64, want: f64| (x - want).abs() < 1e-9 * want;
        assert!(close(epoch_images_per_s(&steps, 2, 1), 14.0 / 0.8), "(8 + 6) / (0.5 + 0.3)");
        assert!(close(epoch_images_per_s(&steps, 2, 2), 32.0), "8 / 0.25");
        assert!(close(epoch_images_per_s(&steps, 3, 1), 6.0 / 0.3), "the profiled step left out");
        assert!(close(epoch_images_per_s(&steps[..4], 3, 1), 8.0 / 2.0), "only profiled steps: all of them");
        assert!(epoch_images_per_s(&steps, 6, 1).is_nan(), "no measured step");
    }
}
