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
    /// The ranks they acted on ...
    pub ranks: Vec<usize>,
    /// ... of this many processes.
    pub processes: usize,
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
    Straggler {
        rank: usize,
        cause: Cause,
    },
}

impl InjectedFaults {
    /// The answer for a cell of `processes` ranks with these faults: a
    /// single slowed rank among several is the straggler, its cause the
    /// fault's (compute, data, communication); a stall, or a fault on
    /// every rank, makes none.
    ///
    /// Formula: straggler = the one named rank when 1 rank of N ≥ 2 is slowed by cpu_share,
    /// input_delay_ms or link; else none.
    pub fn expected(faults: Option<&Self>) -> Expected {
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
            [rank] if f.processes >= 2 => Expected::Straggler { rank, cause },
            _ => Expected::NoStraggler,
        }
    }
}

impl InjectedFaults {
    /// In words, with how each throttled rank was held, e.g. `rank 1: 25 %
    /// of a core (rank 1: cgroup v1 cpu.cfs_quota_us 2500/10000 µs,
    /// stopped in 812 of 1650 periods)`.
    pub fn line(&self) -> String {
        let held: Vec<String> = self
            .throttles
            .iter()
            .map(|t| {
                let periods = match (t.periods, t.throttled_periods) {
                    (Some(n), Some(k)) => format!(", stopped in {k} of {n} periods"),
                    _ => String::new(),
                };
                format!("rank {}: {:.0} % of a core, {}{periods}", t.rank, 100.0 * t.share, t.method)
            })
            .collect();
        match held.is_empty() {
            true => self.described.clone(),
            false => format!("{} ({})", self.described, held.join("; ")),
        }
    }
}

/// Whether cells of axes `a` and `b` differ only in their faults: a
/// faulted cell and its even counterpart, the same cell without them.
///
/// Formula: a less its `faults.*` keys = b less its `faults.*` keys.
pub fn same_but_faults(
    a: &serde_json::Map<String, serde_json::Value>,
    b: &serde_json::Map<String, serde_json::Value>,
) -> bool {
    let kept = |m: &'_ serde_json::Map<String, serde_json::Value>| {
        m.iter()
            .filter(|(k, _)| !k.starts_with("faults."))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    kept(a) == kept(b)
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
        let two = InjectedFaults { processes: 2, ..Default::default() };
        let compute = InjectedFaults { ranks: vec![1], cpu_share: Some(0.25), ..two.clone() };
        assert_eq!(
            InjectedFaults::expected(Some(&compute)),
            Expected::Straggler { rank: 1, cause: Cause::Compute }
        );
        let input =
            InjectedFaults { ranks: vec![2], input_delay_ms: Some(20.0), processes: 3, ..two.clone() };
        assert_eq!(InjectedFaults::expected(Some(&input)).class(), "data");
        let link = InjectedFaults { ranks: vec![0], link: Some("100mbit".into()), ..two.clone() };
        assert_eq!(InjectedFaults::expected(Some(&link)).class(), "communication");
        let stall = InjectedFaults { ranks: vec![1], stall_s: Some(2.0), ..two };
        assert_eq!(InjectedFaults::expected(Some(&stall)), Expected::NoStraggler);
        // One process, or every rank slowed alike, has no straggler to name.
        let one = InjectedFaults { ranks: vec![0], processes: 1, ..compute.clone() };
        assert_eq!(InjectedFaults::expected(Some(&one)), Expected::NoStraggler);
        let both = InjectedFaults { ranks: vec![0, 1], ..compute };
        assert_eq!(InjectedFaults::expected(Some(&both)), Expected::NoStraggler);
        assert_eq!(InjectedFaults::expected(None).class(), "none");
    }

    #[test]
    fn a_cell_and_its_even_counterpart_differ_only_in_faults_keys() {
        let map = |v: serde_json::Value| v.as_object().cloned().unwrap();
        let faulted = map(
            serde_json::json!({"distributed.processes": 2, "faults.ranks": [1], "faults.cpu_share": 0.5}),
        );
        let even = map(serde_json::json!({"distributed.processes": 2}));
        let three = map(serde_json::json!({"distributed.processes": 3}));
        assert!(same_but_faults(&faulted, &even) && same_but_faults(&even, &faulted));
        assert!(!same_but_faults(&faulted, &three));
        // A key other than a fault's tells them apart, whichever side holds it.
        let batch = map(serde_json::json!({"distributed.processes": 2, "train.batch_size": 8}));
        assert!(!same_but_faults(&batch, &even) && !same_but_faults(&even, &batch));
    }
}
