//! The rank that holds the others back. In synchronous data-parallel
//! training every rank's step ends at the same all-reduce, so step times
//! agree whoever is slow; what differs is the work each rank does before it
//! waits there, and how long the others then wait for the slowest.

use crate::RankReport;
use serde::{Deserialize, Serialize};

/// A straggler arrives at least this much later than the others' median,
/// in percent, whatever the noise: smaller gaps cost too little to act on,
/// and are within the asymmetries of one machine's ranks (rank 0's own
/// duties made it arrive 8–10 % late, steadily, on an even 2-core cell).
pub const MIN_GAP_PCT: f64 = 15.0;
/// ... and slower by more than this many times the run's noise.
pub const NOISE_TIMES: f64 = 2.0;
/// ... and the others wait for it at the all-reduce at least this share of the gap.
pub const WAIT_SHARE: f64 = 0.5;
/// Fewest measured steps a rank needs for its median and noise to count.
pub const MIN_STEPS: usize = 5;

/// Why the straggler arrives late at the all-reduce: the part of its
/// step that exceeds the others' by at least [`CAUSE_SHARE`] of its gap
/// ([`Straggler::cause_of`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// Its work (compute less exposed communication) is longer: its CPU or device.
    Compute,
    /// Its data wait is longer: its loader or storage.
    Data,
    /// Its own all-reduces take longer: its link.
    Communication,
    /// No part of its step explains half of its gap.
    #[default]
    Unknown,
}

impl Cause {
    pub fn name(self) -> &'static str {
        match self {
            Self::Compute => "compute",
            Self::Data => "data",
            Self::Communication => "communication",
            Self::Unknown => "unknown",
        }
    }

    /// What a user changes for it.
    pub fn advice(self) -> &'static str {
        match self {
            Self::Compute => "free its CPU or device (another load shares it) or replace the machine",
            Self::Data => "speed up its input: more loader workers, faster or local storage for its shard",
            Self::Communication => "check its network link: every all-reduce waits for it",
            Self::Unknown => {
                "look at its timeline: neither its work, its data wait nor its all-reduces explain the gap"
            }
        }
    }
}

/// A part of the straggler's step explains its gap when it exceeds the
/// others' median by at least this share of the gap.
pub const CAUSE_SHARE: f64 = 0.5;

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
    /// The run's noise: the others' median step-to-step spread of arrival
    /// ([`RankReport::arrival_noise_ms`]); before schema 2.10.0 the larger
    /// of its own and the others' spread of work, in ms.
    pub noise_ms: f64,
    /// What it costs each other rank a step, in ms: the others' median exposed communication (p50) less its own.
    pub wait_ms: f64,
    /// Its arrival at the all-reduce ([`RankReport::arrival_p50_ms`]) and
    /// the median of the others', in ms (schema 2.10.0).
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub arrival_p50_ms: f64,
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub others_arrival_p50_ms: f64,
    /// Its data wait a step (p50) and the median of the others', in ms (schema 2.10.0).
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub data_wait_p50_ms: f64,
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub others_data_wait_p50_ms: f64,
    /// Its all-reduces a step (p50) and the median of the others', in ms (schema 2.10.0).
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub communication_p50_ms: f64,
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub others_communication_p50_ms: f64,
    /// Why it is late ([`Straggler::cause_of`]; schema 2.10.0).
    #[serde(default)]
    pub cause: Cause,
    /// The processes that ran on its machine, where it ran on rank 0's; 0
    /// where unknown (schema 2.11.0).
    #[serde(default)]
    pub machine_processes: usize,
    /// That machine's online logical cores; 0 where unknown (schema 2.11.0).
    #[serde(default)]
    pub machine_cores: usize,
}

impl Straggler {
    /// The straggler among `ranks`, if one holds the others back.
    ///
    /// With `a_r` the arrival p50 (data wait plus work) and `n_r` its noise
    /// for rank `r`, and `e_r` its exposed-communication p50: the candidate
    /// `s` has the largest `a_s`; `others = median(a_r, r ≠ s)`,
    /// `gap = a_s − others`, `noise = median(n_r, r ≠ s)` (its own spread
    /// is part of what is slow about it: a loader that prefetching half
    /// hides makes its arrival vary as much as it is late),
    /// `wait = median(e_r, r ≠ s) − e_s`. It is named when
    /// `gap > NOISE_TIMES × noise`, `gap ≥ MIN_GAP_PCT % × others` and
    /// `wait ≥ WAIT_SHARE × gap`, every rank having at least [`MIN_STEPS`]
    /// measured steps; its cause is [`Straggler::cause_of`].
    ///
    /// Formula: named when gap > 2 × noise, gap ≥ 15 % of others and wait ≥ 0.5 × gap.
    pub fn of(ranks: &[RankReport]) -> Option<Self> {
        let slow = Self::slowest(ranks)?;
        let gap = slow.gap_ms();
        let named = slow.clears_noise()
            && gap >= MIN_GAP_PCT / 100.0 * slow.others_arrival_p50_ms
            && slow.wait_ms >= WAIT_SHARE * gap;
        named.then_some(slow)
    }

    /// The candidate among `ranks`, named or not: the rank that arrives
    /// last at the all-reduce, with its figures against the others' as
    /// [`Straggler::of`] weighs them; `None` with fewer than two ranks, or
    /// one without [`MIN_STEPS`] finite measured steps.
    pub fn slowest(ranks: &[RankReport]) -> Option<Self> {
        let timed: Vec<&RankReport> = ranks
            .iter()
            .filter(|r| {
                r.work_steps >= MIN_STEPS && r.arrival_p50_ms.is_finite() && r.arrival_noise_ms.is_finite()
            })
            .collect();
        if timed.len() < 2 || timed.len() < ranks.len() {
            return None;
        }
        let slow = timed.iter().copied().max_by(|a, b| a.arrival_p50_ms.total_cmp(&b.arrival_p50_ms))?;
        let others: Vec<&RankReport> = timed.iter().copied().filter(|r| r.rank != slow.rank).collect();
        let median_of =
            |f: fn(&RankReport) -> f64| crate::median(&others.iter().map(|r| f(r)).collect::<Vec<_>>());
        let mut s = Straggler {
            rank: slow.rank,
            host: slow.host.clone(),
            work_p50_ms: slow.work_p50_ms,
            others_work_p50_ms: median_of(|r| r.work_p50_ms),
            noise_ms: median_of(|r| r.arrival_noise_ms),
            wait_ms: median_of(|r| r.exposed_communication_p50_ms) - slow.exposed_communication_p50_ms,
            arrival_p50_ms: slow.arrival_p50_ms,
            others_arrival_p50_ms: median_of(|r| r.arrival_p50_ms),
            data_wait_p50_ms: slow.data_wait_p50_ms,
            others_data_wait_p50_ms: median_of(|r| r.data_wait_p50_ms),
            communication_p50_ms: slow.communication_p50_ms,
            others_communication_p50_ms: median_of(|r| r.communication_p50_ms),
            cause: Cause::Unknown,
            machine_processes: 0,
            machine_cores: 0,
        };
        s.cause = s.cause_of();
        Some(s)
    }

    /// Why it is late: of its work, its data wait and its own all-reduces,
    /// the one that exceeds the others' median the most, when that excess
    /// is at least [`CAUSE_SHARE`] of its gap; else [`Cause::Unknown`].
    ///
    /// Formula: Δ_compute = work − others' work, Δ_data = data wait − others' data wait,
    /// Δ_communication = all-reduce − others' all-reduce (each p50); cause = argmax Δ when
    /// max Δ ≥ 0.5 × gap, else unknown.
    pub fn cause_of(&self) -> Cause {
        let gap = self.gap_ms();
        let excess = [
            (Cause::Compute, self.work_p50_ms - self.others_work_p50_ms),
            (Cause::Data, self.data_wait_p50_ms - self.others_data_wait_p50_ms),
            (Cause::Communication, self.communication_p50_ms - self.others_communication_p50_ms),
        ];
        excess
            .into_iter()
            .filter(|(_, d)| d.is_finite())
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .filter(|(_, d)| gap > 0.0 && *d >= CAUSE_SHARE * gap)
            .map_or(Cause::Unknown, |(c, _)| c)
    }

    /// Its arrival beyond the others' median, in ms.
    pub fn gap_ms(&self) -> f64 {
        self.arrival_p50_ms - self.others_arrival_p50_ms
    }

    /// Whether its gap is beyond [`NOISE_TIMES`] × the run's noise: a
    /// smaller one is within what the machine alone makes.
    pub fn clears_noise(&self) -> bool {
        self.gap_ms() > NOISE_TIMES * self.noise_ms
    }

    /// The step a cell of `step_ms` would take were the straggler freed.
    /// Arriving with the others, no rank waits for it. A compute
    /// straggler's own all-reduces, slowed as its work was (the reduction
    /// runs on the same CPU), speed up as much. And where the ranks share
    /// its machine's cores (more processes than cores), the others had
    /// taken the share it left unused: freed, it takes that share back and
    /// the others slow as much. Nothing else of the step changes.
    ///
    /// With S the step, W [`Straggler::wait_ms`], c its all-reduces a step,
    /// r = the others' work / its work for a compute cause (1 otherwise; at
    /// most 1), and P processes on C cores of its machine (k = 1 where
    /// unknown): freed = k × (S − W − c × (1 − r)), k = min(1, C / (P − 1 + r))
    /// / min(1, C / P); at least 1 % of the step.
    ///
    /// Formula: freed step = max(k × (step − wait − c × (1 − r)), 0.01 × step).
    pub fn freed_step_ms(&self, step_ms: f64) -> f64 {
        let r = match self.cause {
            Cause::Compute if self.work_p50_ms > 0.0 => {
                (self.others_work_p50_ms / self.work_p50_ms).clamp(0.0, 1.0)
            }
            _ => 1.0,
        };
        let c = if self.communication_p50_ms.is_finite() { self.communication_p50_ms.max(0.0) } else { 0.0 };
        let (p, cores) = (self.machine_processes as f64, self.machine_cores as f64);
        let k = match p >= 1.0 && cores >= 1.0 {
            true => (cores / (p - 1.0 + r)).min(1.0) / (cores / p).min(1.0),
            false => 1.0,
        };
        (k * (step_ms - self.wait_ms - c * (1.0 - r))).max(step_ms * 0.01)
    }

    /// The rank and its host, e.g. `rank 1 on node-b`.
    pub fn who(&self) -> String {
        if self.host.is_empty() {
            format!("rank {}", self.rank)
        } else {
            format!("rank {} on {}", self.rank, self.host)
        }
    }

    /// The figure behind its cause, in words.
    pub fn because(&self) -> String {
        let (what, own, others) = match self.cause {
            Cause::Compute => ("works", self.work_p50_ms, self.others_work_p50_ms),
            Cause::Data => ("waits for data", self.data_wait_p50_ms, self.others_data_wait_p50_ms),
            Cause::Communication => {
                ("spends in its all-reduces", self.communication_p50_ms, self.others_communication_p50_ms)
            }
            Cause::Unknown => {
                return format!(
                    "cause unknown: no part of its step (work {:+.1} ms, data wait {:+.1} ms, all-reduces {:+.1} ms against the others') explains half of its gap",
                    self.work_p50_ms - self.others_work_p50_ms,
                    self.data_wait_p50_ms - self.others_data_wait_p50_ms,
                    self.communication_p50_ms - self.others_communication_p50_ms,
                )
            }
        };
        format!(
            "cause {}: it {what} {own:.1} ms a step against {others:.1} ms, {:.0} % of its gap",
            self.cause.name(),
            100.0 * (own - others) / self.gap_ms()
        )
    }

    /// The figures in words, for a verdict and the notes under a table.
    pub fn evidence(&self) -> String {
        format!(
            "{} reaches the all-reduce {:.1} ms into a step (p50) against {:.1} ms for the others, beyond the run's noise of {:.1} ms; each other rank waits {:.1} ms a step for it; {}",
            self.who(),
            self.arrival_p50_ms,
            self.others_arrival_p50_ms,
            self.noise_ms,
            self.wait_ms,
            self.because()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rank whose arrival is its data wait plus its work, with `noise`
    /// on the arrival and `exposed` exposed communication.
    fn rank(rank: usize, work: f64, data: f64, noise: f64, exposed: f64) -> RankReport {
        RankReport {
            rank,
            host: format!("node-{rank}"),
            work_steps: 10,
            work_p50_ms: work,
            work_noise_ms: noise,
            data_wait_p50_ms: data,
            arrival_p50_ms: work + data,
            arrival_noise_ms: noise,
            exposed_communication_p50_ms: exposed,
            communication_p50_ms: exposed + 5.0,
            ..RankReport::default()
        }
    }

    #[test]
    fn the_slow_rank_is_named_with_its_gap_noise_wait_and_cause() {
        // Ranks 0 and 2 arrive at 30 and 32 ms (median 31), rank 1 at 60 ms;
        // noise median(1, 2) = 1.5 (its own 3 left out); the others wait
        // median(29, 27) = 28 ms against rank 1's 0.5: wait 27.5 ms. Its work
        // exceeds the others' by 29 of its 29 ms gap: compute.
        let ranks =
            [rank(0, 30.0, 0.0, 1.0, 29.0), rank(1, 60.0, 0.0, 3.0, 0.5), rank(2, 32.0, 0.0, 2.0, 27.0)];
        let s = Straggler::of(&ranks).unwrap();
        assert_eq!((s.rank, s.host.as_str()), (1, "node-1"));
        assert_eq!(
            (s.arrival_p50_ms, s.others_arrival_p50_ms, s.noise_ms, s.wait_ms),
            (60.0, 31.0, 1.5, 27.5)
        );
        assert_eq!(s.cause, Cause::Compute);
        assert!(
            s.evidence().starts_with(
                "rank 1 on node-1 reaches the all-reduce 60.0 ms into a step (p50) against 31.0 ms"
            ),
            "{}",
            s.evidence()
        );
        assert!(s
            .evidence()
            .ends_with("cause compute: it works 60.0 ms a step against 31.0 ms, 100 % of its gap"));
        // Freed, a 70 ms step loses the 27.5 ms the others wait, and its
        // 5.5 ms of all-reduces run 31/60 as long as its work: 70 − 27.5 −
        // 5.5 × 29/60 = 39.84 ms. A wait longer than the step leaves 1 % of it.
        assert!((s.freed_step_ms(70.0) - (42.5 - 5.5 * 29.0 / 60.0)).abs() < 1e-9);
        assert_eq!(s.freed_step_ms(20.0), 0.2);
        // Three processes on two cores: the others had 2 / (2 + 31/60) of
        // a core each, and get 2/3 once it is freed: k = 1.192.
        let shared = Straggler { machine_processes: 3, machine_cores: 2, ..s.clone() };
        let k = (2.0 / (2.0 + 31.0 / 60.0)) / (2.0 / 3.0);
        assert!((shared.freed_step_ms(70.0) - k * (42.5 - 5.5 * 29.0 / 60.0)).abs() < 1e-9);
        // As many cores as processes: nothing to give back. A late loader
        // leaves its all-reduces as they were.
        let own_cores = Straggler { machine_processes: 3, machine_cores: 4, ..s.clone() };
        assert!((own_cores.freed_step_ms(70.0) - s.freed_step_ms(70.0)).abs() < 1e-9);
        let data = Straggler { cause: Cause::Data, ..shared };
        assert_eq!(data.freed_step_ms(70.0), 42.5);
    }

    #[test]
    fn a_rank_late_for_its_data_is_named_with_data_as_its_cause() {
        // Rank 1 works as long as rank 0 (20 against 21 ms) but waits 25 ms
        // for data against 1: it arrives at 45 against 22 ms, a 23 ms gap of
        // which its data wait explains 24 ms.
        let ranks = [rank(0, 21.0, 1.0, 1.0, 24.0), rank(1, 20.0, 25.0, 1.0, 1.0)];
        let s = Straggler::of(&ranks).unwrap();
        assert_eq!((s.rank, s.cause, s.gap_ms()), (1, Cause::Data, 23.0));
        assert!(s
            .because()
            .starts_with("cause data: it waits for data 25.0 ms a step against 1.0 ms, 104 %"));
    }

    #[test]
    fn a_cause_explains_half_of_the_gap_or_none_is_given() {
        // A 20 ms gap: work +8 and data wait +9 ms, neither half of it.
        let mut s =
            Straggler::slowest(&[rank(0, 30.0, 1.0, 1.0, 20.0), rank(1, 38.0, 10.0, 1.0, 0.0)]).unwrap();
        s.others_arrival_p50_ms = s.arrival_p50_ms - 20.0;
        s.cause = s.cause_of();
        assert_eq!(s.cause, Cause::Unknown);
        assert!(s
            .because()
            .starts_with("cause unknown: no part of its step (work +8.0 ms, data wait +9.0 ms"));
        // All-reduces 12 ms longer than the others': communication.
        s.communication_p50_ms = s.others_communication_p50_ms + 12.0;
        assert_eq!(s.cause_of(), Cause::Communication);
    }

    #[test]
    fn none_is_named_within_the_noise_below_the_floor_or_when_nobody_waits() {
        // A gap of 6 ms under twice the other rank's noise of 3.5 ms: the
        // candidate, not cleared (its own noise of 9 ms is not the run's).
        let within = [rank(0, 30.0, 0.0, 3.5, 6.0), rank(1, 36.0, 0.0, 9.0, 0.0)];
        assert!(Straggler::of(&within).is_none());
        let c = Straggler::slowest(&within).unwrap();
        assert_eq!((c.rank, c.gap_ms(), c.noise_ms, c.clears_noise()), (1, 6.0, 3.5, false));
        // The same gap over a noise of 2.5 ms clears it (6 > 5).
        let clear = [rank(0, 30.0, 0.0, 2.5, 6.0), rank(1, 36.0, 0.0, 9.0, 0.0)];
        assert!(Straggler::of(&clear).is_some());
        // A gap of 4 ms, 13 % of the others' arrival, above a tiny noise.
        assert!(Straggler::of(&[rank(0, 30.0, 0.0, 0.1, 4.0), rank(1, 34.0, 0.0, 0.1, 0.0)]).is_none());
        // Later, but the other rank does not wait for it (it waits as long).
        assert!(Straggler::of(&[rank(0, 30.0, 0.0, 0.5, 2.0), rank(1, 40.0, 0.0, 0.5, 2.0)]).is_none());
        // Too few steps, or one rank, names none.
        let few = RankReport { work_steps: 3, ..rank(1, 60.0, 0.0, 1.0, 0.0) };
        assert!(Straggler::of(&[rank(0, 30.0, 0.0, 1.0, 29.0), few]).is_none());
        assert!(Straggler::of(&[rank(0, 30.0, 0.0, 1.0, 29.0)]).is_none());
    }
}
