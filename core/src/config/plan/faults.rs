//! `[faults]`: slowness caused on purpose, on named ranks only, so that
//! benchkit's diagnoses can be scored against a known answer. Each key is
//! an axis like any other; a cell records what it injected.

use crate::config::LinkRate;
use serde::{Deserialize, Serialize};
use std::ops::RangeInclusive;

/// The share of one core a slowed rank's processes may be held to.
pub const CPU_SHARE: RangeInclusive<f64> = 0.1..=1.0;
/// The delay added to each training batch a slowed loader reads, in ms.
pub const INPUT_DELAY_MS: RangeInclusive<f64> = 0.1..=10_000.0;
/// How long a stall lasts, in seconds.
pub const STALL_S: RangeInclusive<f64> = 0.01..=600.0;
/// The most ranks a fault may name.
pub const MAX_RANKS: usize = 1024;

/// What a cell injects, and where.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Faults {
    /// The ranks every fault below acts on; the others run as they would.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<usize>,
    /// Compute: each named rank's process held to this share of one core
    /// (a cgroup's CPU quota where this machine lets benchkit make one,
    /// else pinned to one core beside busy loops).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_share: Option<f64>,
    /// Input: this many ms added to each training batch its loader reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_delay_ms: Option<f64>,
    /// Link: the named ranks' own links shaped to this rate; the others
    /// keep `distributed.link`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkRate>,
    /// A stall: the named ranks pause once for this many seconds ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stall_s: Option<f64>,
    /// ... after this training step (counted from 0, warm-up included);
    /// the middle of the run when left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stall_at_step: Option<usize>,
}

impl Faults {
    /// Whether any fault is injected.
    pub fn any(&self) -> bool {
        self.cpu_share.is_some()
            || self.input_delay_ms.is_some()
            || self.link.is_some()
            || self.stall_s.is_some()
    }

    /// Whether the faults act on `rank`.
    pub fn on(&self, rank: usize) -> bool {
        self.any() && self.ranks.contains(&rank)
    }

    /// The share of a core rank `rank` is held to, if any.
    pub fn cpu_share_of(&self, rank: usize) -> Option<f64> {
        self.cpu_share.filter(|_| self.on(rank))
    }

    /// The delay each training batch of rank `rank`'s loader is given.
    pub fn input_delay_of(&self, rank: usize) -> std::time::Duration {
        let ms = self.input_delay_ms.filter(|_| self.on(rank)).unwrap_or(0.0);
        std::time::Duration::from_secs_f64(ms / 1e3)
    }

    /// The step after which rank `rank` stalls, and for how long, in a run of `steps` steps.
    pub fn stall_of(&self, rank: usize, steps: usize) -> Option<(usize, std::time::Duration)> {
        let s = self.stall_s.filter(|_| self.on(rank))?;
        Some((self.stall_at_step.unwrap_or(steps / 2), std::time::Duration::from_secs_f64(s)))
    }

    /// Rank `rank`'s link: its own where a link fault names it, else `link`.
    pub fn link_of(&self, rank: usize, link: LinkRate) -> LinkRate {
        self.link.filter(|_| self.on(rank)).unwrap_or(link)
    }

    /// In words, e.g. `rank 1: a quarter of a core; 20 ms more a batch read`.
    pub fn describe(&self) -> String {
        if !self.any() {
            return String::new();
        }
        let ranks: Vec<String> = self.ranks.iter().map(usize::to_string).collect();
        let mut what = Vec::new();
        if let Some(share) = self.cpu_share {
            what.push(format!("{:.0} % of a core", 100.0 * share));
        }
        if let Some(ms) = self.input_delay_ms {
            what.push(format!("{ms} ms added to each batch its loader reads"));
        }
        if let Some(link) = self.link {
            what.push(format!("its link at {link}"));
        }
        if let Some(s) = self.stall_s {
            let at = self.stall_at_step.map_or("the middle of the run".into(), |k| format!("step {k}"));
            what.push(format!("one {s} s stall after {at}"));
        }
        let who = if ranks.len() == 1 { "rank" } else { "ranks" };
        format!("{who} {}: {}", ranks.join(", "), what.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_act_on_their_ranks_only_and_say_what_they_are() {
        let f = Faults {
            ranks: vec![1],
            cpu_share: Some(0.25),
            input_delay_ms: Some(20.0),
            link: Some(LinkRate::Shaped(100_000_000)),
            stall_s: Some(2.0),
            stall_at_step: None,
        };
        assert_eq!(f.cpu_share_of(1), Some(0.25));
        assert_eq!(f.cpu_share_of(0), None);
        assert_eq!(f.input_delay_of(1).as_millis(), 20);
        assert_eq!(f.input_delay_of(0).as_millis(), 0);
        assert_eq!(f.stall_of(1, 24), Some((12, std::time::Duration::from_secs(2))));
        assert_eq!(f.stall_of(0, 24), None);
        assert_eq!(f.link_of(1, LinkRate::Host), LinkRate::Shaped(100_000_000));
        assert_eq!(f.link_of(0, LinkRate::Host), LinkRate::Host);
        assert_eq!(
            f.describe(),
            "rank 1: 25 % of a core; 20 ms added to each batch its loader reads; its link at 100mbit; one 2 s stall after the middle of the run"
        );
        // Ranks without a fault inject nothing.
        let none = Faults { ranks: vec![0], ..Faults::default() };
        assert!(!none.on(0) && none.describe().is_empty());
    }
}
