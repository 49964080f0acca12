//! The clock of a profiled step: the device is synchronised at every phase
//! edge, so that each phase's time holds its own device work and no
//! other's. A plain step's clock reads nothing and synchronises nothing.

use crate::train::TrainError;
use benchkit_schema::Phase;
use burn::tensor::backend::Backend;
use std::time::Instant;

/// Seconds per phase, in [`Phase::ALL`]'s order.
pub type PhaseSeconds = [f64; 7];

/// Times one step's phases on one device.
pub(crate) struct Clock<'d, B: Backend> {
    /// Set when the step is profiled.
    device: Option<&'d B::Device>,
    last: Instant,
    spent: PhaseSeconds,
}

impl<'d, B: Backend> Clock<'d, B> {
    /// A clock from now; it synchronises `device` at each mark when `profiled`.
    pub fn start(device: &'d B::Device, profiled: bool) -> Self {
        Self { device: profiled.then_some(device), last: Instant::now(), spent: [0.0; 7] }
    }

    /// End `phase`: wait for the device's queued work, then charge the time
    /// since the last mark to it.
    pub fn mark(&mut self, phase: Phase) -> Result<(), TrainError> {
        let Some(device) = self.device else { return Ok(()) };
        B::sync(device).map_err(|e| {
            TrainError::Backend(format!(
                "device synchronisation after the {} phase failed: {e:?}",
                phase.label()
            ))
        })?;
        let now = Instant::now();
        self.spent[phase.index()] += (now - self.last).as_secs_f64();
        self.last = now;
        Ok(())
    }

    /// The phases' seconds, for a profiled step.
    pub fn finish(self) -> Option<PhaseSeconds> {
        self.device.map(|_| self.spent)
    }
}

/// The step's phases once the step loop knows its data wait and whole
/// compute time: `replica` holds the replica's own phases, and whatever of
/// `compute_s` they do not cover is the step's other time.
pub(crate) fn complete(mut replica: PhaseSeconds, data_wait_s: f64, compute_s: f64) -> PhaseSeconds {
    replica[Phase::DataWait.index()] = data_wait_s;
    let inside: f64 = Phase::ALL
        .iter()
        .filter(|p| !matches!(p, Phase::DataWait | Phase::Other))
        .map(|p| replica[p.index()])
        .sum();
    replica[Phase::Other.index()] = (compute_s - inside).max(0.0);
    replica
}

/// The replica whose profiled phases add up to the longest step: the one
/// the step waited for.
pub(crate) fn slowest(phases: impl IntoIterator<Item = PhaseSeconds>) -> Option<PhaseSeconds> {
    phases.into_iter().max_by(|a, b| a.iter().sum::<f64>().total_cmp(&b.iter().sum::<f64>()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::flex::FlexDevice;
    use burn::backend::Flex;

    #[test]
    fn a_profiled_clock_charges_each_phase_its_own_time() {
        let device = FlexDevice;
        let mut clock = Clock::<Flex>::start(&device, true);
        std::thread::sleep(std::time::Duration::from_millis(20));
        clock.mark(Phase::Forward).unwrap();
        clock.mark(Phase::Backward).unwrap();
        let spent = clock.finish().unwrap();
        assert!(spent[Phase::Forward.index()] >= 0.02);
        assert!(spent[Phase::Backward.index()] < spent[Phase::Forward.index()]);
        assert_eq!(spent[Phase::Optimizer.index()], 0.0);
    }

    #[test]
    fn a_plain_clock_records_nothing() {
        let device = FlexDevice;
        let mut clock = Clock::<Flex>::start(&device, false);
        clock.mark(Phase::Forward).unwrap();
        assert!(clock.finish().is_none());
    }

    #[test]
    fn the_rest_of_the_step_is_other_and_the_slowest_replica_wins() {
        let replica = [9.0, 0.1, 0.3, 0.5, 0.2, 0.1, 9.0];
        let step = complete(replica, 0.05, 1.5);
        assert_eq!(step[Phase::DataWait.index()], 0.05);
        assert!((step[Phase::Other.index()] - 0.3).abs() < 1e-12);
        // Replicas whose phases overrun the step loop's measure leave no negative rest.
        assert_eq!(complete(replica, 0.0, 1.0)[Phase::Other.index()], 0.0);
        let fast = [0.0, 0.1, 0.2, 0.2, 0.0, 0.1, 0.0];
        assert_eq!(slowest([fast, replica, fast]), Some(replica));
        assert_eq!(slowest([]), None);
    }
}
