//! The rank that holds the others back. In synchronous data-parallel
//! training every rank's step ends at the same all-reduce, so step times
//! agree whoever is slow; what differs is the work each rank does before it
//! waits there, and how long the others then wait for the slowest.

use crate::RankReport;
use serde::{Deserialize, Serialize};

/// A straggler is at least this much slower than the others' median work,
/// in percent, whatever the noise: smaller gaps cost too little to act on.
pub const MIN_GAP_PCT: f64 = 5.0;
/// ... and slower by more than this many times the run's noise.
pub const NOISE_TIMES: f64 = 2.0;
/// ... and the others wait for it at the all-reduce at least this share of the gap.
pub const WAIT_SHARE: f64 = 0.5;
/// Fewest measured steps a rank needs for its median and noise to count.
pub const MIN_STEPS: usize = 5;

/// One rank named as the one every other waits for, with the figures that show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Straggler {
    pub rank: usize,
    /// The machine it ran on, as it names itself.
    pub host: String,
    /// Its work a step, median over its measured steps, in ms ([`RankReport::work_p50_ms`]).
    pub work_p50_ms: f64,
    /// The median of the other ranks' `work_p50_ms`.
    pub others_work_p50_ms: f64,
    /// The run's noise: the larger of its own and the others' median
    /// step-to-step spread of work ([`crate::Spread::sigma`]), in ms.
    pub noise_ms: f64,
    /// What it costs each other rank a step, in ms: the others' median exposed communication (p50) less its own.
    pub wait_ms: f64,
}

impl Straggler {
    /// The straggler among `ranks`, if one holds the others back.
    ///
    /// With `w_r` the work p50 and `n_r` the noise of rank `r`, and `e_r`
    /// its exposed-communication p50: the candidate `s` has the largest
    /// `w_s`; `others = median(w_r, r ≠ s)`, `gap = w_s − others`,
    /// `noise = max(n_s, median(n_r, r ≠ s))`, `wait = median(e_r, r ≠ s) − e_s`.
    /// It is named when `gap > NOISE_TIMES × noise`,
    /// `gap ≥ MIN_GAP_PCT % × others` and `wait ≥ WAIT_SHARE × gap`, every
    /// rank having at least [`MIN_STEPS`] measured steps.
    ///
    /// Formula: named when gap > 2 × noise, gap ≥ 5 % of others and wait ≥ 0.5 × gap.
    pub fn of(ranks: &[RankReport]) -> Option<Self> {
        let slow = Self::slowest(ranks)?;
        let gap = slow.gap_ms();
        let named = slow.clears_noise()
            && gap >= MIN_GAP_PCT / 100.0 * slow.others_work_p50_ms
            && slow.wait_ms >= WAIT_SHARE * gap;
        named.then_some(slow)
    }

    /// The candidate among `ranks`, named or not: the rank with the most
    /// work, with its figures against the others' as [`Straggler::of`]
    /// weighs them; `None` with fewer than two ranks, or one without
    /// [`MIN_STEPS`] finite measured steps.
    pub fn slowest(ranks: &[RankReport]) -> Option<Self> {
        let timed: Vec<&RankReport> = ranks
            .iter()
            .filter(|r| r.work_steps >= MIN_STEPS && r.work_p50_ms.is_finite() && r.work_noise_ms.is_finite())
            .collect();
        if timed.len() < 2 || timed.len() < ranks.len() {
            return None;
        }
        let slow = timed.iter().copied().max_by(|a, b| a.work_p50_ms.total_cmp(&b.work_p50_ms))?;
        let others: Vec<&RankReport> = timed.iter().copied().filter(|r| r.rank != slow.rank).collect();
        let median_of =
            |f: fn(&RankReport) -> f64| crate::median(&others.iter().map(|r| f(r)).collect::<Vec<_>>());
        Some(Straggler {
            rank: slow.rank,
            host: slow.host.clone(),
            work_p50_ms: slow.work_p50_ms,
            others_work_p50_ms: median_of(|r| r.work_p50_ms),
            noise_ms: slow.work_noise_ms.max(median_of(|r| r.work_noise_ms)),
            wait_ms: median_of(|r| r.exposed_communication_p50_ms) - slow.exposed_communication_p50_ms,
        })
    }

    /// Its work beyond the others' median, in ms.
    pub fn gap_ms(&self) -> f64 {
        self.work_p50_ms - self.others_work_p50_ms
    }

    /// Whether its gap is beyond [`NOISE_TIMES`] × the run's noise: a
    /// smaller one is within what the machine alone makes.
    pub fn clears_noise(&self) -> bool {
        self.gap_ms() > NOISE_TIMES * self.noise_ms
    }

    /// The rank and its host, e.g. `rank 1 on node-b`.
    pub fn who(&self) -> String {
        if self.host.is_empty() {
            format!("rank {}", self.rank)
        } else {
            format!("rank {} on {}", self.rank, self.host)
        }
    }

    /// The figures in words, for a verdict and the notes under a table.
    pub fn evidence(&self) -> String {
        format!(
            "{} works {:.1} ms a step (p50) against {:.1} ms for the others, beyond the run's noise of {:.1} ms; each other rank waits {:.1} ms a step for it at the all-reduce",
            self.who(),
            self.work_p50_ms,
            self.others_work_p50_ms,
            self.noise_ms,
            self.wait_ms
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(rank: usize, work: f64, noise: f64, exposed: f64) -> RankReport {
        RankReport {
            rank,
            host: format!("node-{rank}"),
            work_steps: 10,
            work_p50_ms: work,
            work_noise_ms: noise,
            exposed_communication_p50_ms: exposed,
            ..RankReport::default()
        }
    }

    #[test]
    fn the_slow_rank_is_named_with_its_gap_noise_and_the_wait_it_costs() {
        // Ranks 0 and 2 work 30 and 32 ms (median 31), rank 1 works 60 ms;
        // noise max(3, median(1, 2) = 1.5) = 3; the others wait
        // median(29, 27) = 28 ms against rank 1's 0.5: wait 27.5 ms.
        let ranks = [rank(0, 30.0, 1.0, 29.0), rank(1, 60.0, 3.0, 0.5), rank(2, 32.0, 2.0, 27.0)];
        let s = Straggler::of(&ranks).unwrap();
        assert_eq!((s.rank, s.host.as_str()), (1, "node-1"));
        assert_eq!((s.work_p50_ms, s.others_work_p50_ms, s.noise_ms, s.wait_ms), (60.0, 31.0, 3.0, 27.5));
        assert!(
            s.evidence().starts_with("rank 1 on node-1 works 60.0 ms a step (p50) against 31.0 ms"),
            "{}",
            s.evidence()
        );
    }

    #[test]
    fn none_is_named_within_the_noise_below_the_floor_or_when_nobody_waits() {
        // A gap of 4 ms under twice a noise of 2.5 ms: the candidate, not cleared.
        let within = [rank(0, 30.0, 2.5, 4.0), rank(1, 34.0, 1.0, 0.0)];
        assert!(Straggler::of(&within).is_none());
        let c = Straggler::slowest(&within).unwrap();
        assert_eq!((c.rank, c.gap_ms(), c.noise_ms, c.clears_noise()), (1, 4.0, 2.5, false));
        // The same gap over a noise of 1.5 ms clears it (4 > 3).
        let clear = [rank(0, 30.0, 1.5, 4.0), rank(1, 34.0, 1.0, 0.0)];
        assert!(Straggler::slowest(&clear).unwrap().clears_noise());
        // A gap of 1 ms, 3 % of the others' work, above a tiny noise.
        assert!(Straggler::of(&[rank(0, 30.0, 0.1, 1.0), rank(1, 31.0, 0.1, 0.0)]).is_none());
        // Slower work, but the other rank does not wait for it (it waits as long).
        assert!(Straggler::of(&[rank(0, 30.0, 0.5, 2.0), rank(1, 40.0, 0.5, 2.0)]).is_none());
        // Too few steps, or one rank, names none.
        let few = RankReport { work_steps: 3, ..rank(1, 60.0, 1.0, 0.0) };
        assert!(Straggler::of(&[rank(0, 30.0, 1.0, 29.0), few]).is_none());
        assert!(Straggler::of(&[rank(0, 30.0, 1.0, 29.0)]).is_none());
    }
}
