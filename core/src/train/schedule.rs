//! Learning rate as a function of the step, and how many steps an epoch has.

use super::TrainError;
use crate::config::{LrSchedule, TrainPlan};

/// Full batches per epoch, capped by `max_steps_per_epoch`; an error when
/// the split cannot fill one batch.
pub fn steps_per_epoch(plan: &TrainPlan, train_len: usize) -> Result<usize, TrainError> {
    let full = train_len / plan.batch_size;
    let steps = plan.max_steps_per_epoch.map_or(full, |m| m.min(full));
    if steps == 0 {
        return Err(TrainError::Setup(format!(
            "the training set has {train_len} images, fewer than one batch of {}",
            plan.batch_size
        )));
    }
    Ok(steps)
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
}
