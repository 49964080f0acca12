//! A cell's summary: the figures users compare, computed from the step
//! records. Warm-up steps are excluded from every statistic and summarised
//! on their own.

use crate::measure::Summary;
use crate::train::{EpochRecord, TrainOutcome};
use serde::Serialize;

/// The steps excluded from the statistics, against the steady state.
#[derive(Clone, Debug, Serialize)]
pub struct Warmup {
    pub steps: usize,
    pub mean_step_ms: f64,
    /// Mean warm-up step time over mean measured step time.
    pub slowdown: f64,
}

/// Results of one cell of the matrix.
#[derive(Clone, Debug, Serialize)]
pub struct CellResult {
    pub cell: String,
    pub model: String,
    pub backend: String,
    pub params: usize,
    pub forward_macs_per_image: u64,
    pub batch_size: usize,
    pub steps_measured: usize,
    /// Measured training images per second (all workers).
    pub images_per_s: f64,
    pub step_ms: Summary,
    pub data_wait_ms: Summary,
    pub compute_ms: Summary,
    /// Share of measured step time spent waiting for data, in percent.
    pub data_wait_pct: f64,
    pub warmup: Warmup,
    pub final_test_accuracy: f64,
    pub best_test_accuracy: f64,
    pub epochs: Vec<EpochRecord>,
    /// Wall time of the whole cell: training, evaluation and setup.
    pub wall_s: f64,
    pub train_s: f64,
    pub eval_s: f64,
}

impl CellResult {
    /// Summarise a finished training.
    pub fn new(
        cell: &str,
        model: &str,
        backend: &str,
        macs: u64,
        batch_size: usize,
        outcome: &TrainOutcome,
        wall_s: f64,
    ) -> Self {
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
        Self {
            cell: cell.into(),
            model: model.into(),
            backend: backend.into(),
            params: outcome.num_params,
            forward_macs_per_image: macs,
            batch_size,
            steps_measured: measured.len(),
            images_per_s: if step_total > 0.0 { images as f64 / step_total } else { f64::NAN },
            step_ms,
            data_wait_ms: Summary::of(&ms(|s| s.data_wait_s)),
            compute_ms: Summary::of(&ms(|s| s.compute_s)),
            data_wait_pct: if step_total > 0.0 { 100.0 * wait_total / step_total } else { f64::NAN },
            warmup: Warmup { steps: warm.len(), mean_step_ms: warm_mean, slowdown: warm_mean / step_ms.mean },
            final_test_accuracy: outcome.epochs.last().map_or(f64::NAN, |e| e.test_accuracy),
            best_test_accuracy: acc.fold(f64::NAN, f64::max),
            epochs: outcome.epochs.clone(),
            wall_s,
            train_s: outcome.epochs.iter().map(|e| e.train_s).sum(),
            eval_s: outcome.epochs.iter().map(|e| e.eval_s).sum(),
        }
    }
}
