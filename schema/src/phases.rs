//! Where a profiled step's time goes: waiting for data, the host-to-device
//! copy, forward, backward, the exposed communication (the all-reduce not
//! hidden behind compute), the
//! optimizer, and the rest, with what the profiling itself cost.

use serde::{Deserialize, Serialize};

/// One part of a training step, in the order a step runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
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

    /// The key its mean milliseconds are written under in a step's phases.
    pub fn key(self) -> &'static str {
        match self {
            Phase::DataWait => "data_wait_ms",
            Phase::HostToDevice => "host_to_device_ms",
            Phase::Forward => "forward_ms",
            Phase::Backward => "backward_ms",
            Phase::ExposedCommunication => "exposed_communication_ms",
            Phase::Optimizer => "optimizer_ms",
            Phase::Other => "other_ms",
        }
    }
}

/// Mean time per profiled step in each phase, in milliseconds, in
/// [`Phase::ALL`]'s order.
pub type PhaseMs = [f64; 7];

/// A cell's (or one rank's) profiled steps: the mean of each phase, and
/// what synchronising the device at every phase edge cost against the
/// plain steps interleaved with them. Written with each phase under its
/// own key ([`Phase::key`]: `forward_ms`, …); since schema 2.1.0 the
/// positional `ms` array beside them is kept for readers of 2.0 only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(from = "PhasesFile", into = "PhasesFile")]
pub struct StepPhases {
    /// Profiled steps the means are over.
    pub steps: usize,
    /// Mean milliseconds per step in each phase, in [`Phase::ALL`]'s order.
    pub ms: PhaseMs,
    /// Mean profiled step, in milliseconds (the sum of `ms`).
    pub step_ms: f64,
    /// Mean plain step of the same cell, in milliseconds (NaN with none).
    pub plain_step_ms: f64,
    /// What profiling added to a step: `step_ms / plain_step_ms − 1`, in percent.
    pub overhead_pct: f64,
}

/// [`StepPhases`] as the results files hold it: every phase by name. A
/// figure that could not be measured (NaN) is `null`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct PhasesFile {
    /// Profiled steps the means are over.
    pub steps: usize,
    /// Mean milliseconds per profiled step waiting for the loader.
    #[serde(default)]
    pub data_wait_ms: Option<f64>,
    /// Mean milliseconds per profiled step copying the batch to the device.
    #[serde(default)]
    pub host_to_device_ms: Option<f64>,
    /// Mean milliseconds per profiled step in the forward pass, loss included.
    #[serde(default)]
    pub forward_ms: Option<f64>,
    /// Mean milliseconds per profiled step in the backward pass.
    #[serde(default)]
    pub backward_ms: Option<f64>,
    /// Mean milliseconds per profiled step waiting for the all-reduce after the backward pass.
    #[serde(default)]
    pub exposed_communication_ms: Option<f64>,
    /// Mean milliseconds per profiled step in the optimizer step.
    #[serde(default)]
    pub optimizer_ms: Option<f64>,
    /// Mean milliseconds per profiled step in the rest of the step.
    #[serde(default)]
    pub other_ms: Option<f64>,
    /// The same seven means in [`Phase::ALL`]'s order (data wait,
    /// host-to-device, forward, backward, exposed communication, optimizer,
    /// other). Deprecated: read the named keys; it goes at schema 3.
    #[serde(default)]
    pub ms: Option<[Option<f64>; 7]>,
    /// Mean profiled step, in milliseconds (the sum of the phases).
    pub step_ms: Option<f64>,
    /// Mean plain step of the same cell, in milliseconds.
    pub plain_step_ms: Option<f64>,
    /// What profiling added to a step, in percent.
    pub overhead_pct: Option<f64>,
}

impl PhasesFile {
    fn named(&self) -> [Option<f64>; 7] {
        [
            self.data_wait_ms,
            self.host_to_device_ms,
            self.forward_ms,
            self.backward_ms,
            self.exposed_communication_ms,
            self.optimizer_ms,
            self.other_ms,
        ]
    }
}

fn nan(v: Option<f64>) -> f64 {
    v.unwrap_or(f64::NAN)
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// `value` with every step's phases by position alone, as schema 1.x and
/// 2.0 wrote them: the named keys 2.1.0 added are taken out of each object
/// that holds the positional `ms` beside its `steps`.
pub fn unname(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            if map.contains_key("steps") && map.get("ms").is_some_and(serde_json::Value::is_array) {
                for phase in Phase::ALL {
                    map.remove(phase.key());
                }
            }
            map.values_mut().for_each(unname);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(unname),
        _ => {}
    }
}

impl From<PhasesFile> for StepPhases {
    /// The named phases; a file of schema 2.0 has the positional array alone.
    fn from(f: PhasesFile) -> Self {
        let named = f.named();
        let array = f.ms.unwrap_or([None; 7]);
        let any_named = named.iter().any(Option::is_some);
        let ms = std::array::from_fn(|i| nan(if any_named { named[i] } else { array[i] }));
        Self {
            steps: f.steps,
            ms,
            step_ms: nan(f.step_ms),
            plain_step_ms: nan(f.plain_step_ms),
            overhead_pct: nan(f.overhead_pct),
        }
    }
}

impl From<StepPhases> for PhasesFile {
    fn from(p: StepPhases) -> Self {
        let m = p.ms.map(finite);
        Self {
            steps: p.steps,
            data_wait_ms: m[0],
            host_to_device_ms: m[1],
            forward_ms: m[2],
            backward_ms: m[3],
            exposed_communication_ms: m[4],
            optimizer_ms: m[5],
            other_ms: m[6],
            ms: Some(m),
            step_ms: finite(p.step_ms),
            plain_step_ms: finite(p.plain_step_ms),
            overhead_pct: finite(p.overhead_pct),
        }
    }
}

impl StepPhases {
    /// The means of `steps` profiled steps whose phases add up to `sums`
    /// seconds, beside plain steps whose mean is `plain_step_s` (NaN with none).
    /// `None` without a profiled step.
    ///
    /// Formula: phase ms = 1000 × Σ the phase's seconds over the profiled steps / profiled steps.
    /// Formula: overhead_pct = 100 × (mean profiled step / mean plain step − 1).
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
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct RankSpread {
    pub slowest_rank: usize,
    pub fastest_rank: usize,
    /// Slowest over fastest, ≥ 1.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub ratio: f64,
}

impl RankSpread {
    /// The spread over `(rank, phases)` pairs; `None` with fewer than two profiled ranks.
    ///
    /// Formula: ratio = the slowest rank's forward + backward + optimizer ms / the fastest's.
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
    fn phases_are_written_by_name_and_a_2_0_array_still_reads() {
        let p = StepPhases::of(4, [0.4, 0.0, 2.0, 4.0, 0.0, 1.6, 0.0], 1.9).unwrap();
        let json = serde_json::to_value(&p).unwrap();
        for phase in Phase::ALL {
            assert_eq!(json[phase.key()].as_f64(), Some(p.get(phase)), "{phase:?}");
        }
        assert_eq!(json["forward_ms"], 500.0);
        let old = serde_json::json!({"steps": 4, "ms": [100.0, 0.0, 500.0, 1000.0, 0.0, 400.0, null],
            "step_ms": 2000.0, "plain_step_ms": null, "overhead_pct": null});
        let back: StepPhases = serde_json::from_value(old).unwrap();
        assert_eq!(back.get(Phase::Backward), 1000.0);
        assert!(back.get(Phase::Other).is_nan() && back.plain_step_ms.is_nan());
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
