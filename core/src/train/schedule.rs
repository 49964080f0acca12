//! Learning rate as a function of the step.

use crate::config::LrSchedule;

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
