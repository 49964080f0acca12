//! A cell's summary: the figures users compare, computed from the step
//! records. Warm-up steps are excluded from every statistic and summarised
//! on their own.

use crate::measure::Summary;
use crate::train::{EpochRecord, TrainOutcome};
use serde::{Deserialize, Serialize};

/// The steps excluded from the statistics, against the steady state.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Warmup {
    pub steps: usize,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub mean_step_ms: f64,
    /// Mean warm-up step time over mean measured step time.
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub slowdown: f64,
}

/// How input-bound a training cell was, from the share of step time spent
/// waiting for data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputBound {
    /// Under 5 % of step time waiting.
    No,
    /// 5 % to 20 %.
    Moderately,
    /// 20 % or more.
    Highly,
    /// Loader-only cells have no step to wait.
    NotApplicable,
}

impl InputBound {
    pub const MODERATE_PCT: f64 = 5.0;
    pub const HIGH_PCT: f64 = 20.0;

    pub fn of(stall_pct: f64) -> Self {
        if stall_pct.is_nan() {
            InputBound::NotApplicable
        } else if stall_pct >= Self::HIGH_PCT {
            InputBound::Highly
        } else if stall_pct >= Self::MODERATE_PCT {
            InputBound::Moderately
        } else {
            InputBound::No
        }
    }

    /// The word tables show: `ok`, `moderately`, `highly` (input-bound), `-`.
    pub fn label(self) -> &'static str {
        match self {
            InputBound::No => "ok",
            InputBound::Moderately => "moderately",
            InputBound::Highly => "highly",
            InputBound::NotApplicable => "-",
        }
    }
}

/// The loader as a cell ran it: every resolved knob and where its time went.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LoaderReport {
    pub source: String,
    pub pipeline: String,
    /// Worker threads; 0 means the step loop's own thread (naive pipeline,
    /// or synthetic data, whose one batch is built once).
    pub workers: usize,
    /// Batches queued ahead of the step loop; 0 when there are no workers.
    pub prefetch: usize,
    pub shuffle: String,
    pub interleave: usize,
    pub on_corrupt: String,
    /// `[channels, height, width]` every sample is decoded to.
    pub decoded_shape: [u32; 3],
    pub resize: Option<[u32; 2]>,
    /// Training batches built.
    pub batches: usize,
    /// Mean worker time per training batch in each stage (summed over its samples).
    pub read_ms: f64,
    pub decode_ms: f64,
    pub transform_ms: f64,
    /// Samples left out because they could not be decoded, and the first few.
    pub skipped: usize,
    pub skipped_examples: Vec<String>,
    /// Caption sources: vocabulary size and longest caption in tokens.
    pub vocabulary: Option<usize>,
    pub max_tokens: Option<usize>,
}

/// What identifies a cell's run and prices it, known before training.
#[derive(Clone, Debug)]
pub struct CellMeta {
    pub cell: String,
    /// 1-based repeat number.
    pub repeat: u32,
    pub axes: serde_json::Map<String, serde_json::Value>,
    pub model: String,
    pub backend: String,
    pub forward_macs_per_image: u64,
    pub usd_per_hour: Option<f64>,
    pub started_unix_ms: u64,
    pub mode: crate::config::Mode,
    pub loader: LoaderReport,
    /// What the accuracy figures measure: "top-1", "mean AUROC" or "token accuracy".
    pub accuracy_metric: String,
    /// The training settings: global batch, target accuracy, learning rate, parallel layout.
    pub train: crate::config::TrainPlan,
}

/// One process of a multi-process cell, over its measured steps.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RankReport {
    pub rank: usize,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub images_per_s: f64,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub step_ms: f64,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub data_wait_pct: f64,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub all_reduce_pct: f64,
}

/// How the cell's training was spread over workers, and what that cost.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct ParallelReport {
    /// Replicas over all processes: `processes × devices`.
    pub workers: usize,
    pub processes: usize,
    pub devices: usize,
    pub strategy: String,
    pub global_batch: usize,
    pub per_worker_batch: usize,
    /// Measured images per second per worker (the cell's total over `workers`).
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub images_per_s_per_worker: f64,
    /// The slowest replica's gradient all-reduce, per measured step.
    pub all_reduce_ms: Summary,
    /// Share of measured step time in the all-reduce, in percent.
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub all_reduce_pct: f64,
    /// Gradient bytes each worker all-reduces per step (0 with one worker).
    pub gradient_bytes_per_step: usize,
    pub lr_scaling: String,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub base_lr: f64,
    /// The rate after warm-up: `base_lr × workers` with linear scaling.
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub peak_lr: f64,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub warmup_epochs: f64,
    /// Whether every replica ended with the same parameters (absent with one worker).
    pub replicas_agree: Option<bool>,
    /// Per process, rank order (several processes only).
    pub ranks: Vec<RankReport>,
    /// Per-worker images/s over the 1-worker cell's images/s, for cells
    /// that differ from one only in their workers.
    pub scaling_efficiency: Option<f64>,
    /// The 1-worker cell it was compared with.
    pub baseline_cell: Option<String>,
}

impl Default for ParallelReport {
    fn default() -> Self {
        Self {
            workers: 1,
            processes: 1,
            devices: 1,
            strategy: "-".into(),
            global_batch: 0,
            per_worker_batch: 0,
            images_per_s_per_worker: f64::NAN,
            all_reduce_ms: Summary::of(&[]),
            all_reduce_pct: f64::NAN,
            gradient_bytes_per_step: 0,
            lr_scaling: "none".into(),
            base_lr: f64::NAN,
            peak_lr: f64::NAN,
            warmup_epochs: 0.0,
            replicas_agree: None,
            ranks: Vec::new(),
            scaling_efficiency: None,
            baseline_cell: None,
        }
    }
}

/// Results of one run of one cell of the matrix.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CellResult {
    pub cell: String,
    /// 1-based repeat number.
    pub repeat: u32,
    /// Swept key -> value for this cell.
    pub axes: serde_json::Map<String, serde_json::Value>,
    pub model: String,
    pub backend: String,
    pub params: usize,
    pub forward_macs_per_image: u64,
    pub batch_size: usize,
    pub steps_measured: usize,
    /// Measured training images per second (all workers).
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub images_per_s: f64,
    pub step_ms: Summary,
    pub data_wait_ms: Summary,
    pub compute_ms: Summary,
    /// When devices were synchronised: "step" (each step's time includes its
    /// device work) or "epoch" (on a GPU, step times are enqueue times).
    #[serde(default = "epoch_timing")]
    pub timing: String,
    /// The float format the cell trained in: "f32", "bf16" or "f16".
    #[serde(default = "f32_precision")]
    pub precision: String,
    /// Share of measured step time spent waiting for data, in percent.
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub data_wait_pct: f64,
    /// The verdict on `data_wait_pct`.
    #[serde(default = "not_applicable")]
    pub input_bound: InputBound,
    #[serde(default = "train_mode")]
    pub mode: crate::config::Mode,
    #[serde(default)]
    pub loader: LoaderReport,
    pub warmup: Warmup,
    /// What the accuracy figures measure: "top-1" (classification), "mean
    /// AUROC" (multi-label, over the labels) or "token accuracy" (captioning).
    #[serde(default = "top_1")]
    pub accuracy_metric: String,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub final_test_accuracy: f64,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub best_test_accuracy: f64,
    pub epochs: Vec<EpochRecord>,
    /// Wall time of the whole cell: training, evaluation and setup.
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub wall_s: f64,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub train_s: f64,
    #[serde(deserialize_with = "crate::measure::stats::f64_or_nan")]
    pub eval_s: f64,
    pub target_accuracy: Option<f64>,
    /// Training plus evaluation time until test accuracy first reached the target.
    pub time_to_target_s: Option<f64>,
    pub epochs_to_target: Option<u32>,
    pub usd_per_hour: Option<f64>,
    /// Mean cost of one epoch (training and evaluation) at `usd_per_hour`.
    pub usd_per_epoch: Option<f64>,
    pub usd_to_target: Option<f64>,
    pub started_unix_ms: u64,
    pub finished_unix_ms: u64,
    #[serde(default)]
    pub parallel: ParallelReport,
    /// What NVML saw of the GPUs while the cell ran (CUDA cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::measure::GpuReport>,
}

fn epoch_timing() -> String {
    "epoch".into()
}

fn f32_precision() -> String {
    "f32".into()
}

fn not_applicable() -> InputBound {
    InputBound::NotApplicable
}

fn top_1() -> String {
    "top-1".into()
}

fn train_mode() -> crate::config::Mode {
    crate::config::Mode::Train
}

impl CellResult {
    /// Summarise a finished training.
    pub fn new(meta: CellMeta, outcome: &TrainOutcome, wall_s: f64) -> Self {
        let (warm, measured) = outcome.steps.split_at(outcome.warmup_steps);
        let ms = |f: fn(&crate::train::StepRecord) -> f64| -> Vec<f64> {
            measured.iter().map(|s| f(s) * 1e3).collect()
        };
        let step_ms = Summary::of(&ms(|s| s.total_s()));
        let wait_total: f64 = measured.iter().map(|s| s.data_wait_s).sum();
        let step_total: f64 = measured.iter().map(|s| s.total_s()).sum();
        let images: usize = measured.iter().map(|s| s.images).sum();
        let warm_mean = if warm.is_empty() {
            f64::NAN
        } else {
            warm.iter().map(|s| s.total_s()).sum::<f64>() * 1e3 / warm.len() as f64
        };
        let acc = outcome.epochs.iter().map(|e| e.test_accuracy);
        let reached =
            meta.train.target_accuracy.and_then(|t| outcome.epochs.iter().position(|e| e.test_accuracy >= t));
        let time_to_target_s =
            reached.map(|i| outcome.epochs[..=i].iter().map(|e| e.train_s + e.eval_s).sum::<f64>());
        let epoch_s = outcome.epochs.iter().map(|e| e.train_s + e.eval_s).sum::<f64>()
            / outcome.epochs.len().max(1) as f64;
        let usd = |seconds: f64| meta.usd_per_hour.map(|p| p * seconds / 3600.0);
        let parallel = parallel_report(&meta.train, outcome, measured);
        // Several processes: the cell's throughput is every process's images
        // over the slowest process's measured time.
        let images_per_s = if outcome.ranks.len() > 1 {
            let images: usize = outcome.ranks.iter().map(|r| r.images).sum();
            let slowest = outcome.ranks.iter().map(|r| r.step_s).fold(0.0, f64::max);
            if slowest > 0.0 {
                images as f64 / slowest
            } else {
                f64::NAN
            }
        } else if step_total > 0.0 {
            images as f64 / step_total
        } else {
            f64::NAN
        };
        let parallel =
            ParallelReport { images_per_s_per_worker: images_per_s / parallel.workers as f64, ..parallel };
        Self {
            cell: meta.cell,
            repeat: meta.repeat,
            axes: meta.axes,
            model: meta.model,
            backend: meta.backend,
            params: outcome.num_params,
            forward_macs_per_image: meta.forward_macs_per_image,
            batch_size: meta.train.batch_size,
            steps_measured: measured.len(),
            images_per_s,
            step_ms,
            data_wait_ms: Summary::of(&ms(|s| s.data_wait_s)),
            compute_ms: Summary::of(&ms(|s| s.compute_s)),
            timing: meta.train.timing.name().into(),
            precision: meta.train.precision.name().into(),
            data_wait_pct: if step_total > 0.0 { 100.0 * wait_total / step_total } else { f64::NAN },
            input_bound: if meta.mode == crate::config::Mode::Train && step_total > 0.0 {
                InputBound::of(100.0 * wait_total / step_total)
            } else {
                InputBound::NotApplicable
            },
            mode: meta.mode,
            loader: meta.loader,
            warmup: Warmup { steps: warm.len(), mean_step_ms: warm_mean, slowdown: warm_mean / step_ms.mean },
            accuracy_metric: meta.accuracy_metric,
            final_test_accuracy: outcome.epochs.last().map_or(f64::NAN, |e| e.test_accuracy),
            best_test_accuracy: acc.fold(f64::NAN, f64::max),
            epochs: outcome.epochs.clone(),
            wall_s,
            train_s: outcome.epochs.iter().map(|e| e.train_s).sum(),
            eval_s: outcome.epochs.iter().map(|e| e.eval_s).sum(),
            target_accuracy: meta.train.target_accuracy,
            time_to_target_s,
            epochs_to_target: reached.map(|i| outcome.epochs[i].epoch),
            usd_per_hour: meta.usd_per_hour,
            usd_per_epoch: if outcome.epochs.is_empty() { None } else { usd(epoch_s) },
            usd_to_target: time_to_target_s.and_then(usd),
            started_unix_ms: meta.started_unix_ms,
            finished_unix_ms: crate::measure::env::unix_ms(),
            parallel,
            gpu: outcome.gpu.clone(),
        }
    }
}

/// The parallel layout and its measured costs, from the steps after warm-up.
fn parallel_report(
    plan: &crate::config::TrainPlan,
    outcome: &TrainOutcome,
    measured: &[crate::train::StepRecord],
) -> ParallelReport {
    let p = &plan.parallel;
    let workers = p.devices * p.processes;
    let step_total: f64 = measured.iter().map(|s| s.total_s()).sum();
    let reduce_total: f64 = measured.iter().map(|s| s.all_reduce_s).sum();
    let pct = |part: f64, whole: f64| if whole > 0.0 { 100.0 * part / whole } else { f64::NAN };
    ParallelReport {
        workers,
        processes: p.processes,
        devices: p.devices,
        strategy: if workers > 1 {
            serde_json::to_value(p.strategy)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default()
        } else {
            "-".into()
        },
        global_batch: plan.batch_size,
        per_worker_batch: plan.batch_size / workers.max(1),
        images_per_s_per_worker: f64::NAN,
        all_reduce_ms: Summary::of(&measured.iter().map(|s| s.all_reduce_s * 1e3).collect::<Vec<_>>()),
        all_reduce_pct: if workers > 1 { pct(reduce_total, step_total) } else { f64::NAN },
        gradient_bytes_per_step: outcome.gradient_bytes,
        lr_scaling: match plan.lr_scaling {
            crate::config::LrScaling::None => "none".into(),
            crate::config::LrScaling::Linear => "linear".into(),
        },
        base_lr: plan.lr,
        peak_lr: plan.peak_lr(),
        warmup_epochs: plan.warmup_epochs,
        replicas_agree: outcome.replicas_agree,
        ranks: if outcome.ranks.len() > 1 {
            outcome
                .ranks
                .iter()
                .map(|r| RankReport {
                    rank: r.rank,
                    images_per_s: if r.step_s > 0.0 { r.images as f64 / r.step_s } else { f64::NAN },
                    step_ms: if r.steps > 0 { 1e3 * r.step_s / r.steps as f64 } else { f64::NAN },
                    data_wait_pct: pct(r.data_wait_s, r.step_s),
                    all_reduce_pct: pct(r.all_reduce_s, r.step_s),
                })
                .collect()
        } else {
            Vec::new()
        },
        scaling_efficiency: None,
        baseline_cell: None,
    }
}

/// Set a multi-worker result's scaling efficiency against the 1-worker
/// results in `earlier` whose swept values differ only in `devices`,
/// `distributed.processes` and the global batch (their mean, over repeats).
pub fn score_scaling(result: &mut CellResult, earlier: &[CellResult]) {
    const WORKER_KEYS: &[&str] = &["devices", "distributed.processes", "train.batch_size"];
    let key = |r: &CellResult| -> Vec<(String, String)> {
        r.axes
            .iter()
            .filter(|(k, _)| !WORKER_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect()
    };
    if result.parallel.workers <= 1 {
        return;
    }
    let own = key(result);
    let same: Vec<&CellResult> = earlier
        .iter()
        .filter(|b| b.parallel.workers == 1 && b.images_per_s.is_finite() && key(b) == own)
        .collect();
    if let Some(first) = same.first() {
        let base = same.iter().map(|b| b.images_per_s).sum::<f64>() / same.len() as f64;
        result.parallel.scaling_efficiency = Some(result.parallel.images_per_s_per_worker / base);
        result.parallel.baseline_cell = Some(first.cell.clone());
    }
}
