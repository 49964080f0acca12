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
    pub batch_size: usize,
    pub target_accuracy: Option<f64>,
    pub usd_per_hour: Option<f64>,
    pub started_unix_ms: u64,
    pub mode: crate::config::Mode,
    pub loader: LoaderReport,
    /// What the accuracy figures measure: "top-1", "mean AUROC" or "token accuracy".
    pub accuracy_metric: String,
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
            meta.target_accuracy.and_then(|t| outcome.epochs.iter().position(|e| e.test_accuracy >= t));
        let time_to_target_s =
            reached.map(|i| outcome.epochs[..=i].iter().map(|e| e.train_s + e.eval_s).sum::<f64>());
        let epoch_s = outcome.epochs.iter().map(|e| e.train_s + e.eval_s).sum::<f64>()
            / outcome.epochs.len().max(1) as f64;
        let usd = |seconds: f64| meta.usd_per_hour.map(|p| p * seconds / 3600.0);
        Self {
            cell: meta.cell,
            repeat: meta.repeat,
            axes: meta.axes,
            model: meta.model,
            backend: meta.backend,
            params: outcome.num_params,
            forward_macs_per_image: meta.forward_macs_per_image,
            batch_size: meta.batch_size,
            steps_measured: measured.len(),
            images_per_s: if step_total > 0.0 { images as f64 / step_total } else { f64::NAN },
            step_ms,
            data_wait_ms: Summary::of(&ms(|s| s.data_wait_s)),
            compute_ms: Summary::of(&ms(|s| s.compute_s)),
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
            target_accuracy: meta.target_accuracy,
            time_to_target_s,
            epochs_to_target: reached.map(|i| outcome.epochs[i].epoch),
            usd_per_hour: meta.usd_per_hour,
            usd_per_epoch: if outcome.epochs.is_empty() { None } else { usd(epoch_s) },
            usd_to_target: time_to_target_s.and_then(usd),
            started_unix_ms: meta.started_unix_ms,
            finished_unix_ms: crate::measure::env::unix_ms(),
        }
    }
}
