//! What a cell injected on purpose (`[faults]`), recorded beside every
//! figure it touched, and what benchkit should then have named: the
//! known answer its diagnoses are scored against.

use crate::straggler::Cause;
use serde::{Deserialize, Serialize};

/// The faults a cell's repeat ran with (schema 2.10.0).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct InjectedFaults {
    /// The ranks they acted on.
    pub ranks: Vec<usize>,
    /// In words, e.g. `rank 1: 25 % of a core`.
    pub described: String,
    /// Each named rank's process held to this share of one core, as asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_share: Option<f64>,
    /// Added to each training batch the named ranks' loaders read, in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_delay_ms: Option<f64>,
    /// The named ranks' own link rate, e.g. `100mbit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// One stall of this many seconds on each named rank ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stall_s: Option<f64>,
    /// ... after this training step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stall_at_step: Option<usize>,
    /// How each compute-slowed rank was held, and what it got.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub throttles: Vec<Throttle>,
}

/// One rank's process held to a share of a core.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Throttle {
    pub rank: usize,
    /// The share of one core it got: the quota over the period, or one
    /// over the processes sharing its core.
    pub share: f64,
    /// How, e.g. `cgroup v1 cpu.cfs_quota_us 2500/10000 µs`.
    pub method: String,
    /// Of the quota's periods it ran in, those it was stopped in (cgroups).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub periods: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttled_periods: Option<u64>,
}

/// What a diagnosis should name for a cell: a straggler (its rank and
/// cause) or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// No rank holds the others back: an even cell, a stall (one step, not
    /// the median), or faults on every rank alike.
    NoStraggler,
    Straggler { rank: usize, cause: Cause },
}

impl InjectedFaults {
    /// The answer for a cell of `processes` ranks with these faults: a
    /// single slowed rank among several is the straggler, its cause the
    /// fault's (compute, data, communication); a stall, or a fault on
    /// every rank, makes none.
    ///
    /// Formula: straggler = the one named rank when 1 rank of N ≥ 2 is slowed by cpu_share,
    /// input_delay_ms or link; else none.
    pub fn expected(faults: Option<&Self>, processes: usize) -> Expected {
        let Some(f) = faults else { return Expected::NoStraggler };
        let cause = if f.cpu_share.is_some() {
            Cause::Compute
        } else if f.input_delay_ms.is_some() {
            Cause::Data
        } else if f.link.is_some() {
            Cause::Communication
        } else {
            return Expected::NoStraggler;
        };
        match f.ranks[..] {
            [rank] if processes >= 2 => Expected::Straggler { rank, cause },
            _ => Expected::NoStraggler,
        }
    }
}

impl Expected {
    /// A row or column of the confusion table: `compute`, …, or `none`.
    pub fn class(self) -> &'static str {
        match self {
            Self::NoStraggler => "none",
            Self::Straggler { cause, .. } => cause.name(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_slowed_rank_of_several_is_the_answer_and_a_stall_names_none() {
        let compute = InjectedFaults { ranks: vec![1], cpu_share: Some(0.25), ..Default::default() };
        assert_eq!(
            InjectedFaults::expected(Some(&compute), 2),
            Expected::Straggler { rank: 1, cause: Cause::Compute }
        );
        let input = InjectedFaults { ranks: vec![2], input_delay_ms: Some(20.0), ..Default::default() };
        assert_eq!(InjectedFaults::expected(Some(&input), 3).class(), "data");
        let link = InjectedFaults { ranks: vec![0], link: Some("100mbit".into()), ..Default::default() };
        assert_eq!(InjectedFaults::expected(Some(&link), 2).class(), "communication");
        let stall = InjectedFaults { ranks: vec![1], stall_s: Some(2.0), ..Default::default() };
        assert_eq!(InjectedFaults::expected(Some(&stall), 2), Expected::NoStraggler);
        // One process, or every rank slowed alike, has no straggler to name.
        assert_eq!(InjectedFaults::expected(Some(&compute), 1), Expected::NoStraggler);
        let both = InjectedFaults { ranks: vec![0, 1], ..compute };
        assert_eq!(InjectedFaults::expected(Some(&both), 2), Expected::NoStraggler);
        assert_eq!(InjectedFaults::expected(None, 3).class(), "none");
    }
}
