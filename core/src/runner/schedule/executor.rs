//! Who runs one repeat of a cell for the scheduler: [`Processes`], the
//! real one, starts cell processes and trains; [`Mock`] trains nothing and
//! answers at once with figures that depend only on the cell and repeat,
//! under a clock that never moves, so that everything a run prints and
//! writes can be snapshot-tested (hyperfine's mock executor is the model).

use super::attempt::{attempt_cell, Attempt};
use crate::analysis::{cell_result, CellMeta};
use crate::config::{Cell, Mode};
use crate::report::LoaderReport;
use crate::runner::message::CellMessage;
use crate::runner::RunnerError;
use crate::train::{EpochRecord, StepRecord, TrainOutcome};
use benchkit_schema::Failure;
use std::path::PathBuf;

/// Runs repeats of cells and tells the time.
pub trait Executor {
    /// Run repeat `repeat` (1-based) of `cell`, passing progress to `on_message`.
    fn attempt(
        &mut self,
        cell: &Cell,
        repeat: u32,
        on_message: &mut dyn FnMut(CellMessage),
    ) -> Result<Attempt, RunnerError>;

    /// The clock events are stamped with, in Unix milliseconds.
    fn clock(&self) -> fn() -> u64;
}

/// Each repeat in processes of its own (`<program> cell`).
pub struct Processes {
    pub program: PathBuf,
}

impl Executor for Processes {
    fn attempt(
        &mut self,
        cell: &Cell,
        repeat: u32,
        on_message: &mut dyn FnMut(CellMessage),
    ) -> Result<Attempt, RunnerError> {
        attempt_cell(&self.program, cell, repeat, on_message)
    }

    fn clock(&self) -> fn() -> u64 {
        crate::measure::env::unix_ms
    }
}

/// The instant a mock run happens at: 2027-01-15 08:00:00 UTC.
pub const MOCK_TIME_MS: u64 = 1_800_000_000_000;

/// The largest global batch a mock cell trains; a larger one runs out of memory.
pub const MOCK_LARGEST_BATCH: usize = 1024;

/// Deterministic figures in place of training.
#[derive(Clone, Debug, Default)]
pub struct Mock {
    /// Cells (by id) whose last repeat fails.
    pub fail: Vec<String>,
    /// Cells (by id) whose every repeat is killed at its first attempt: a
    /// transient failure, which succeeds when tried again.
    pub flaky: Vec<String>,
    /// After this many attempts the process exits as if it had been killed.
    pub stop_after: Option<usize>,
    attempts: usize,
    /// The (cell, repeat) pairs of flaky cells already killed once.
    killed: Vec<(String, u32)>,
}

impl Mock {
    /// A mock steered by `BENCHKIT_MOCK_FAIL` and `BENCHKIT_MOCK_FLAKY`
    /// (cell ids, `;`-separated) and `BENCHKIT_MOCK_STOP_AFTER` (attempts).
    pub fn from_env() -> Self {
        let ids = |name: &str| -> Vec<String> {
            std::env::var(name)
                .map(|v| v.split(';').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect())
                .unwrap_or_default()
        };
        let stop_after = std::env::var("BENCHKIT_MOCK_STOP_AFTER").ok().and_then(|v| v.trim().parse().ok());
        Self {
            fail: ids("BENCHKIT_MOCK_FAIL"),
            flaky: ids("BENCHKIT_MOCK_FLAKY"),
            stop_after,
            attempts: 0,
            killed: Vec::new(),
        }
    }
}

impl Executor for Mock {
    fn attempt(
        &mut self,
        cell: &Cell,
        repeat: u32,
        on_message: &mut dyn FnMut(CellMessage),
    ) -> Result<Attempt, RunnerError> {
        if self.stop_after.is_some_and(|n| self.attempts >= n) {
            std::process::exit(137);
        }
        self.attempts += 1;
        if repeat == cell.plan.repeats_per_cell() && self.fail.contains(&cell.id) {
            return Ok(Attempt::Failed(Failure::plain("mock failure")));
        }
        let first = (cell.id.clone(), repeat);
        if self.flaky.contains(&cell.id) && !self.killed.contains(&first) {
            self.killed.push(first);
            return Ok(Attempt::Failed(Failure::transient("mock: the cell process died from signal 9")));
        }
        let batch = cell.plan.train.batch_size;
        if batch > MOCK_LARGEST_BATCH {
            return Ok(Attempt::Failed(Failure::plain(format!(
                "out of memory: the mock trains batches of up to {MOCK_LARGEST_BATCH}, not {batch}"
            ))));
        }
        let outcome = mock_outcome(cell, repeat);
        for epoch in &outcome.epochs {
            on_message(CellMessage::Epoch(epoch.clone()));
        }
        let wall_s = outcome.epochs.iter().map(|e| e.train_s + e.eval_s).sum::<f64>() + 1.5;
        let mut result = cell_result(mock_meta(cell, repeat), &outcome, wall_s);
        result.mock = true;
        Ok(Attempt::Done(result))
    }

    fn clock(&self) -> fn() -> u64 {
        || MOCK_TIME_MS
    }
}

/// Where a cell sits among the mock's speeds, 0 to 3: from its id, so that
/// a cell's figures do not depend on the order the matrix lists it in.
fn place(cell: &Cell) -> usize {
    (crate::hash::fnv1a(cell.id.as_bytes()) % 4) as usize
}

/// Ten steps per epoch whose times grow with the per-replica batch, the
/// replicas and the cell's place, with a slow first step; every third
/// repeat is half again as slow.
fn mock_outcome(cell: &Cell, repeat: u32) -> TrainOutcome {
    let plan = &cell.plan.train;
    let batch = plan.batch_size;
    let slow = if repeat.is_multiple_of(3) { 1.5 } else { 1.0 + 0.02 * f64::from(repeat) };
    let place = place(cell);
    // Each replica computes its share of the batch; more replicas, more exchange.
    let replicas = plan.replicas().max(1);
    let base_ms =
        (20.0 + 2.0 * (batch / replicas) as f64 / 32.0 + 5.0 * place as f64 + 3.0 * (replicas - 1) as f64)
            * slow;
    let epochs = plan.epochs.max(1);
    let train = cell.plan.mode == Mode::Train;
    let warmup = plan.warmup_steps.min(2);
    let plan_seed = cell.plan.seed;
    let steps: Vec<StepRecord> = (0..10 * epochs as usize)
        .map(|i| {
            let data_wait_s = (0.5 + (i % 3) as f64 * 0.25 + place as f64) / 1e3;
            let compute_s =
                if train { (base_ms + (i % 5) as f64 + if i == 0 { 50.0 } else { 0.0 }) / 1e3 } else { 0.0 };
            // Every other measured step of a profiled cell is profiled, and 5 % slower.
            let profiled = train && plan.profile && i >= warmup && (i - warmup).is_multiple_of(2);
            let compute_s = if profiled { 1.05 * compute_s } else { compute_s };
            StepRecord {
                epoch: 1 + (i / 10) as u32,
                data_wait_s,
                compute_s,
                exposed_communication_s: 0.0,
                communication_s: 0.0,
                images: batch,
                phases: profiled.then(|| {
                    let c = compute_s;
                    [data_wait_s, 0.02 * c, 0.3 * c, 0.5 * c, 0.0, 0.15 * c, 0.03 * c]
                }),
            }
        })
        .collect();
    let epoch_records = (1..=epochs)
        .map(|e| {
            // Seeds 1, 2, 3, 4 … score 0, 1, 2, 0 … points more.
            let seeded = 0.01 * ((plan_seed + 2) % 3) as f64;
            let accuracy = if train { 0.5 + seeded + 0.3 * (1.0 - 0.5f64.powi(e as i32)) } else { f64::NAN };
            EpochRecord {
                epoch: e,
                steps: 10,
                images: 10 * batch,
                eval_images: 100,
                train_loss: if train { 1.5 / f64::from(e) } else { f64::NAN },
                train_accuracy: accuracy - 0.02,
                test_loss: if train { 1.4 / f64::from(e) } else { f64::NAN },
                test_accuracy: accuracy,
                images_per_s: 1e3 * batch as f64 / base_ms,
                train_s: 10.0 * base_ms / 1e3,
                eval_s: 0.25,
                lr_end: plan.lr / f64::from(e),
                end_unix_ms: MOCK_TIME_MS,
                metrics: Default::default(),
                pr_curve: Vec::new(),
            }
        })
        .collect();
    TrainOutcome {
        num_params: 100_000 + 1_000 * place,
        peak_rss_mib: Some(256.0 + 16.0 * batch as f64 / 32.0 + place as f64),
        ..TrainOutcome::of_steps(steps, warmup, epoch_records)
    }
}

fn mock_meta(cell: &Cell, repeat: u32) -> CellMeta {
    let plan = &cell.plan;
    CellMeta {
        memory_estimate_bytes: None,
        seed: plan.seed,
        energy: Some(Ok(("mock".into(), 40.0 + 10.0 * place(cell) as f64 + f64::from(repeat)))),
        cell: cell.id.clone(),
        repeat,
        axes: cell.axes.clone(),
        model: plan.model.source.to_string().trim_start_matches("builtin:").to_string(),
        backend: plan.backend.to_string(),
        forward_macs_per_image: 1_000_000,
        usd_per_hour: plan.usd_per_hour,
        started_unix_ms: MOCK_TIME_MS,
        mode: plan.mode,
        loader: LoaderReport {
            source: plan.data.source.to_string(),
            pipeline: serde_json::to_value(plan.data.pipeline)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            decoded_shape: plan.data.shape,
            ..LoaderReport::default()
        },
        accuracy_metric: "top-1".into(),
        train: plan.train.clone(),
    }
}
