//! Learning rate as a function of the step, and how many steps an epoch has.

use crate::config::{LrSchedule, TrainPlan};
use crate::train::TrainError;

/// Batches per epoch (full ones; with `drop_last = false` the partial
/// last one too), capped by `max_steps_per_epoch`; an error when the split
/// (this process's share of it) cannot fill one batch.
pub fn steps_per_epoch(plan: &TrainPlan, train_len: usize) -> Result<usize, TrainError> {
    let full = train_len / plan.local_batch();
    let full = if plan.drop_last || full == 0 { full } else { train_len.div_ceil(plan.local_batch()) };
    let steps = plan.max_steps_per_epoch.map_or(full, |m| m.min(full));
    if steps == 0 {
        return Err(TrainError::Setup(format!(
            "the training set has {train_len} images, fewer than one batch of {}",
            plan.local_batch()
        )));
    }
    Ok(steps)
}

/// Learning rate at `step` (0-based) of `total` steps, `per_epoch` to an
/// epoch: a linear ramp from `lr` to the scaled rate over `warmup_epochs`
/// (Goyal et al.'s gradual warm-up), then the schedule from the scaled rate.
pub fn lr_for(plan: &TrainPlan, step: usize, per_epoch: usize, total: usize) -> f64 {
    let peak = plan.peak_lr();
    let warm = (plan.warmup_epochs * per_epoch as f64).round() as usize;
    if step < warm {
        plan.lr + (peak - plan.lr) * step as f64 / warm as f64
    } else {
        lr_at(plan.lr_schedule, peak, step - warm, total.saturating_sub(warm))
    }
}

/// Learning rate at `step` (0-based) of `total` steps.
pub fn lr_at(schedule: LrSchedule, base: f64, step: usize, total: usize) -> f64 {
    match schedule {
        LrSchedule::Constant => base,
        LrSchedule::Cosine => {
            let t = step as f64 / total.max(1) as f64;
            0.5 * base * (1.0 + (std::f64::consts::PI * t).cos())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_starts_at_base_and_decays_to_zero() {
        assert_eq!(lr_at(LrSchedule::Cosine, 0.1, 0, 100), 0.1);
        assert!((lr_at(LrSchedule::Cosine, 0.1, 50, 100) - 0.05).abs() < 1e-12);
        assert!(lr_at(LrSchedule::Cosine, 0.1, 100, 100).abs() < 1e-12);
        assert_eq!(lr_at(LrSchedule::Constant, 0.1, 77, 100), 0.1);
    }

    #[test]
    fn linear_scaling_warms_up_from_the_base_rate() {
        let mut plan: TrainPlan = serde_json::from_value(serde_json::json!({
            "epochs": 4, "batch_size": 64, "eval_batch_size": 64, "drop_last": true, "lr": 0.1,
            "lr_schedule": "constant", "momentum": 0.9, "nesterov": false, "weight_decay": 0.0,
            "warmup_steps": 0, "max_steps_per_epoch": null, "target_accuracy": null,
            "lr_scaling": "linear", "warmup_epochs": 2.0
        }))
        .unwrap();
        plan.parallel.devices = 2;
        plan.parallel.processes = 2;
        assert!((plan.peak_lr() - 0.4).abs() < 1e-12);
        // 10 steps an epoch: 20 steps of warm-up from 0.1 to 0.4.
        assert!((lr_for(&plan, 0, 10, 40) - 0.1).abs() < 1e-12);
        assert!((lr_for(&plan, 10, 10, 40) - 0.25).abs() < 1e-12);
        assert!((lr_for(&plan, 20, 10, 40) - 0.4).abs() < 1e-12);
        assert!((lr_for(&plan, 39, 10, 40) - 0.4).abs() < 1e-12);
        plan.lr_schedule = LrSchedule::Cosine;
        assert!((lr_for(&plan, 20, 10, 40) - 0.4).abs() < 1e-12, "cosine starts after warm-up");
        assert!(lr_for(&plan, 39, 10, 40) < 0.01);
        plan.lr_scaling = crate::config::LrScaling::None;
        plan.warmup_epochs = 0.0;
        assert!((lr_for(&plan, 0, 10, 40) - 0.1).abs() < 1e-12);
    }
}
