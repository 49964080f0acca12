//! `mode = "loader-only"`: the step loop with the step taken out. Every
//! batch is taken from the loader as soon as it is ready and dropped, so the
//! figures are the loader's own throughput, with no model to hide behind.

use super::records::{EpochRecord, StepRecord, TrainOutcome};
use super::{CellJob, TrainError};
use std::time::Instant;

/// Drain the loader for the job's epochs and steps; nothing is trained.
pub fn loader_only(job: CellJob<'_>) -> Result<TrainOutcome, TrainError> {
    let CellJob { plan, loader, train_set, on_step, on_epoch, world, .. } = job;
    let per_epoch = super::optim::lr_schedule::steps_per_epoch(plan, train_set.len())?;
    let total = per_epoch * plan.epochs as usize;
    let mut steps: Vec<StepRecord> = Vec::with_capacity(total);
    let mut epochs = Vec::with_capacity(plan.epochs as usize);
    for epoch in 1..=plan.epochs {
        let started = Instant::now();
        let mut images = 0;
        {
            let batches = loader.epoch(train_set.clone(), u64::from(epoch), true)?.take(per_epoch);
            let mut t0 = Instant::now();
            for batch in batches {
                let count = batch?.count;
                let t1 = Instant::now();
                steps.push(StepRecord {
                    epoch,
                    data_wait_s: (t1 - t0).as_secs_f64(),
                    compute_s: 0.0,
                    exposed_communication_s: 0.0,
                    communication_s: 0.0,
                    images: count,
                    phases: None,
                });
                images += count;
                on_step(steps.len(), total);
                t0 = t1;
            }
        }
        let train_s = started.elapsed().as_secs_f64();
        let measured: Vec<&StepRecord> =
            steps.iter().skip(plan.warmup_steps).filter(|s| s.epoch == epoch).collect();
        let measured_s: f64 = measured.iter().map(|s| s.total_s()).sum();
        let measured_images: usize = measured.iter().map(|s| s.images).sum();
        let record = EpochRecord {
            epoch,
            steps: steps.iter().filter(|s| s.epoch == epoch).count(),
            images,
            eval_images: 0,
            train_loss: f64::NAN,
            train_accuracy: f64::NAN,
            test_loss: f64::NAN,
            test_accuracy: f64::NAN,
            images_per_s: if measured_s > 0.0 { measured_images as f64 / measured_s } else { f64::NAN },
            train_s,
            eval_s: 0.0,
            lr_end: f64::NAN,
            end_unix_ms: crate::measure::env::unix_ms(),
            metrics: Default::default(),
            pr_curve: Vec::new(),
        };
        on_epoch(&record);
        epochs.push(record);
    }
    Ok(TrainOutcome {
        rank: world.map_or(0, |w| w.rank),
        peak_rss_mib: crate::measure::memory::peak_rss_mib(),
        ..TrainOutcome::of_steps(steps, plan.warmup_steps.min(total), epochs)
    })
}
