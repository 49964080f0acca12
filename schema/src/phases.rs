//! Where a profiled step's time goes: waiting for data, the host-to-device
//! copy, forward, backward, the exposed communication (the all-reduce not
//! hidden behind compute), the
//! optimizer, and the rest, with what the profiling itself cost.

use serde::{Deserialize, Serialize};

/// One part of a training step, in the order a step runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Waiting for the loader's batch.
    DataWait,
    /// The batch's images and targets copied onto the device.
    HostToDevice,
    /// The model's forward pass and the loss.
    Forward,
    /// Gradients.
    Backward,
    /// Exposed communication: the gradient all-reduce the step waited for
    /// (none is hidden behind compute while the device is synchronised).
    ExposedCommunication,
    /// The optimizer's update.
    Optimizer,
    /// The step's time outside the phases above: handing parts to
    /// replicas, collecting their reports, bookkeeping.
    Other,
}

impl Phase {
    /// Every phase, in step order.
    pub const ALL: [Phase; 7] = [
        Phase::DataWait,
        Phase::HostToDevice,
        Phase::Forward,
        Phase::Backward,
        Phase::ExposedCommunication,
        Phase::Optimizer,
        Phase::Other,
    ];

    /// The short name tables use.
    pub fn label(self) -> &'static str {
        match self {
            Phase::DataWait => "data wait",
            Phase::HostToDevice => "h2d",
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::ExposedCommunication => "exposed comm.",
            Phase::Optimizer => "optimizer",
            Phase::Other => "other",
        }
    }

    /// Its index in [`Phase::ALL`] and in phase arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Mean time per profiled step in each phase, in milliseconds, in
/// [`Phase::ALL`]'s order.
pub type PhaseMs = [f64; 7];

/// A cell's (or one rank's) profiled steps: the mean of each phase, and
/// what synchronising the device at every phase edge cost against the
/// plain steps interleaved with them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepPhases {
    /// Profiled steps the means are over.
    pub steps: usize,
    /// Mean milliseconds per step in each phase, in [`Phase::ALL`]'s order.
    #[serde(deserialize_with = "crate::stats::f64s_or_nan")]
    pub ms: PhaseMs,
    /// Mean profiled step, in milliseconds (the sum of `ms`).
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub step_ms: f64,
    /// Mean plain step of the same cell, in milliseconds (NaN with none).
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub plain_step_ms: f64,
    /// What profiling added to a step: `step_ms / plain_step_ms − 1`, in percent.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub overhead_pct: f64,
}

impl StepPhases {
    /// The means of `steps` profiled steps whose phases add up to `sums`
    /// seconds, beside plain steps whose mean is `plain_step_s` (NaN with none).
    /// `None` without a profiled step.
    pub fn of(steps: usize, sums: [f64; 7], plain_step_s: f64) -> Option<Self> {
        if steps == 0 {
            return None;
        }
        let ms = sums.map(|s| 1e3 * s / steps as f64);
        let step_ms: f64 = ms.iter().sum();
        let plain_step_ms = 1e3 * plain_step_s;
        let overhead_pct =
            if plain_step_ms > 0.0 { 100.0 * (step_ms / plain_step_ms - 1.0) } else { f64::NAN };
        Some(Self { steps, ms, step_ms, plain_step_ms, overhead_pct })
    }

    /// Milliseconds per step in `phase`.
    pub fn get(&self, phase: Phase) -> f64 {
        self.ms[phase.index()]
    }

    /// `phase`'s share of the profiled step, in percent.
    pub fn pct(&self, phase: Phase) -> f64 {
        if self.step_ms > 0.0 {
            100.0 * self.get(phase) / self.step_ms
        } else {
            f64::NAN
        }
    }

    /// The device's own work per step: forward, backward and optimizer.
    pub fn compute_ms(&self) -> f64 {
        [Phase::Forward, Phase::Backward, Phase::Optimizer].iter().map(|&p| self.get(p)).sum()
    }

    /// The phase that takes longest.
    pub fn largest(&self) -> Phase {
        Phase::ALL.into_iter().fold(Phase::DataWait, |a, b| if self.get(b) > self.get(a) { b } else { a })
    }
}

/// How far the ranks' device work per step spreads: the slowest rank's
/// forward + backward + optimizer over the fastest's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankSpread {
    pub slowest_rank: usize,
    pub fastest_rank: usize,
    /// Slowest over fastest, ≥ 1.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub ratio: f64,
}

impl RankSpread {
    /// The spread over `(rank, phases)` pairs; `None` with fewer than two profiled ranks.
    pub fn of<'a>(ranks: impl IntoIterator<Item = (usize, &'a StepPhases)>) -> Option<Self> {
        let timed: Vec<(usize, f64)> =
            ranks.into_iter().map(|(r, p)| (r, p.compute_ms())).filter(|(_, ms)| *ms > 0.0).collect();
        if timed.len() < 2 {
            return None;
        }
        let slowest = timed.iter().copied().fold(timed[0], |a, b| if b.1 > a.1 { b } else { a });
        let fastest = timed.iter().copied().fold(timed[0], |a, b| if b.1 < a.1 { b } else { a });
        Some(Self { slowest_rank: slowest.0, fastest_rank: fastest.0, ratio: slowest.1 / fastest.1 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_shares_and_overhead() {
        // 4 profiled steps: 0.4 s of data wait, 2 s forward, 4 s backward, 1.6 s optimizer.
        let p = StepPhases::of(4, [0.4, 0.0, 2.0, 4.0, 0.0, 1.6, 0.0], 1.9).unwrap();
        assert_eq!(p.ms, [100.0, 0.0, 500.0, 1000.0, 0.0, 400.0, 0.0]);
        assert_eq!(p.step_ms, 2000.0);
        assert!((p.overhead_pct - 100.0 * (2000.0 / 1900.0 - 1.0)).abs() < 1e-9);
        assert_eq!(p.pct(Phase::Backward), 50.0);
        assert_eq!(p.compute_ms(), 1900.0);
        assert_eq!(p.largest(), Phase::Backward);
        assert!(StepPhases::of(0, [1.0; 7], 1.0).is_none());
        assert!(StepPhases::of(2, [1.0; 7], f64::NAN).unwrap().overhead_pct.is_nan());
    }

    #[test]
    fn spread_names_the_slowest_and_fastest_rank() {
        let at = |fwd: f64| StepPhases::of(1, [0.0, 0.0, fwd, 0.2, 0.0, 0.1, 0.0], f64::NAN).unwrap();
        let (a, b, c) = (at(0.2), at(0.7), at(0.4));
        let s = RankSpread::of([(0, &a), (1, &b), (2, &c)]).unwrap();
        assert_eq!((s.slowest_rank, s.fastest_rank), (1, 0));
        assert!((s.ratio - 1.0 / 0.5).abs() < 1e-9);
        assert!(RankSpread::of([(0, &a)]).is_none());
    }

    #[test]
    fn phases_read_back_with_nan_as_null() {
        let p = StepPhases::of(2, [0.0, f64::NAN, 1.0, 1.0, 0.0, 0.5, 0.0], f64::NAN).unwrap();
        let json = serde_json::to_string(&p).unwrap();
        let back: StepPhases = serde_json::from_str(&json).unwrap();
        assert!(back.ms[1].is_nan() && back.plain_step_ms.is_nan());
        assert_eq!(back.ms[2], 500.0);
    }
}
