//! `[faults]`: each fault's strength within its range, the ranks it names
//! within the cell, and what the machine needs to inject it.

use super::{Checks, Validator};
use crate::config::plan::faults::{CPU_SHARE, INPUT_DELAY_MS, MAX_RANKS, STALL_S};
use crate::config::plan::{Launch, TrainPlan};
use crate::config::raw::RawFaults;
use crate::config::{ConfigError, Faults, LinkRate};

impl Validator<'_> {
    /// The faults of `raw` for a cell laid out as `train.parallel` says.
    pub(super) fn faults(&self, raw: Option<&RawFaults>, train: &mut TrainPlan) -> Result<(), ConfigError> {
        let Some(f) = raw else { return Ok(()) };
        let range =
            |r: &std::ops::RangeInclusive<f64>, unit: &str| format!("{} to {}{unit}", r.start(), r.end());
        let mut faults = Faults {
            ranks: Vec::new(),
            cpu_share: self.optional(
                &f.cpu_share,
                |s| CPU_SHARE.contains(&s),
                &range(&CPU_SHARE, " of a core"),
            )?,
            input_delay_ms: self.optional(
                &f.input_delay_ms,
                |ms| INPUT_DELAY_MS.contains(&ms),
                &range(&INPUT_DELAY_MS, " ms"),
            )?,
            link: None,
            stall_s: self.optional(&f.stall_s, |s| STALL_S.contains(&s), &range(&STALL_S, " s"))?,
            stall_at_step: self.optional(&f.stall_at_step, |_| true, "a step")?,
        };
        let p = &train.parallel;
        if let Some(given) = &f.link {
            let link = LinkRate::parse(given.get_ref())
                .map_err(|why| format!("faults.link: {why}"))
                .and_then(|l| match l {
                    LinkRate::Host => Err(
                        "faults.link names the slowed ranks' rate, e.g. \"100mbit\"; \"host\" slows nothing"
                            .into(),
                    ),
                    shaped => Ok(shaped),
                });
            let link = match link {
                Ok(l) => l,
                Err(why) => return self.err(given.span(), why),
            };
            if p.processes < 2 || p.launch == Launch::External {
                return self.err(given.span(), "faults.link shapes one rank's link among the processes this machine starts: it needs distributed.processes = 2 or more with launch = \"local\"");
            }
            if self.checks != Checks::KeysOnly {
                if let Err(why) = crate::netns::available() {
                    return self.err(
                        given.span(),
                        format!("faults.link runs each process in a network namespace of its own, and {why}"),
                    );
                }
            }
            faults.link = Some(link);
        }
        if let (Some(s), Launch::External) = (&f.cpu_share, p.launch) {
            return self.err(s.span(), "faults.cpu_share holds the processes this machine starts to a share of a core; an external launcher starts these: use launch = \"local\"");
        }
        if f.stall_at_step.is_some() && faults.stall_s.is_none() {
            let span = f.stall_at_step.as_ref().map_or(0..0, |s| s.span());
            return self.err(span, "faults.stall_at_step says when the stall set by faults.stall_s comes: set faults.stall_s too, or leave it out");
        }
        let ranks_span = f.ranks.as_ref().map_or(0..0, |r| r.span());
        let ranks = f.ranks.as_ref().map(|r| r.get_ref().clone()).unwrap_or_default();
        if !faults.any() {
            return match f.ranks {
                Some(_) => self.err(ranks_span, "faults.ranks names where the faults act, and none is set: add cpu_share, input_delay_ms, link or stall_s, or leave [faults] out"),
                None => Ok(()),
            };
        }
        if ranks.is_empty() {
            // Point at the first fault set: the table has no ranks line.
            let set = [f.cpu_share.as_ref().map(|v| v.span()), f.input_delay_ms.as_ref().map(|v| v.span())]
                .into_iter()
                .chain([f.link.as_ref().map(|v| v.span()), f.stall_s.as_ref().map(|v| v.span())]);
            let span = set.flatten().min_by_key(|s| s.start).unwrap_or(ranks_span);
            return self.err(
                span,
                format!("[faults] acts on the ranks it names: set faults.ranks, e.g. [{}]", p.processes - 1),
            );
        }
        if let Some(r) = ranks.iter().find(|&&r| r >= p.processes) {
            return self.err(
                ranks_span,
                format!(
                    "faults.ranks names rank {r}, and this cell has {} process(es): ranks 0 to {}",
                    p.processes,
                    p.processes - 1
                ),
            );
        }
        if ranks.len() > MAX_RANKS {
            return self
                .err(ranks_span, format!("faults.ranks names {} ranks; at most {MAX_RANKS}", ranks.len()));
        }
        faults.ranks = ranks;
        faults.ranks.sort_unstable();
        faults.ranks.dedup();
        train.faults = faults;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{ConfigError, Plan};

    /// `faults` (a `[faults]` table's lines) validated in a config of
    /// `processes` ranks on synthetic data.
    fn parse(processes: usize, faults: &str) -> Result<Plan, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let body = format!(
            "[data]\nsource = \"synthetic\"\n\n[model]\nplugin = \"builtin:resnet\"\n\n[train]\nbatch_per_replica = 8\n\n[distributed]\nprocesses = {processes}\n\n[faults]\n{faults}\n"
        );
        Plan::parse(&body, &dir.path().join("c.toml"))
    }

    #[test]
    fn faults_are_read_sorted_and_held_to_their_ranges() {
        let plan =
            parse(3, "ranks = [2, 0, 2]\ncpu_share = 0.25\ninput_delay_ms = 20\nstall_s = 1.5").unwrap();
        let f = &plan.train.faults;
        assert_eq!(
            (f.ranks.as_slice(), f.cpu_share, f.input_delay_ms, f.stall_s),
            (&[0, 2][..], Some(0.25), Some(20.0), Some(1.5))
        );
        assert!(crate::config::within_ranges(&plan).is_ok());
        for (faults, key, says) in [
            ("ranks = [1]\ncpu_share = 0.05", "faults.cpu_share", "0.1 to 1 of a core"),
            ("ranks = [1]\ncpu_share = 1.5", "faults.cpu_share", "0.1 to 1 of a core"),
            ("ranks = [1]\ninput_delay_ms = 0", "faults.input_delay_ms", "0.1 to 10000 ms"),
            ("ranks = [1]\nstall_s = 601", "faults.stall_s", "0.01 to 600 s"),
            ("ranks = [2]\ncpu_share = 0.5", "faults.ranks", "rank 2, and this cell has 2 process(es)"),
            ("cpu_share = 0.5", "faults.cpu_share", "set faults.ranks"),
            ("ranks = [1]", "faults.ranks", "none is set"),
            ("ranks = [1]\nstall_at_step = 3", "faults.stall_at_step", "set faults.stall_s too"),
            ("ranks = [1]\nlink = \"host\"", "faults.link", "slows nothing"),
            ("ranks = [1]\nlink = \"fast\"", "faults.link", "400gbit"),
        ] {
            let err = parse(2, faults).unwrap_err();
            assert!(err.key.starts_with(key) && err.message.contains(says), "{faults}: {err}");
        }
        // A link among one process has no other end.
        let err = parse(1, "ranks = [0]\nlink = \"100mbit\"").unwrap_err();
        assert!(err.message.contains("distributed.processes = 2 or more"), "{err}");
    }

    #[test]
    fn a_plan_read_back_holds_its_faults_to_the_same_ranges() {
        let mut plan = parse(2, "ranks = [1]\ncpu_share = 0.5\nstall_s = 1").unwrap();
        plan.train.faults.stall_s = Some(1e9);
        let why = crate::config::within_ranges(&plan).unwrap_err();
        assert!(why.contains("faults.stall_s = 1000000000"), "{why}");
        plan.train.faults.stall_s = Some(1.0);
        plan.train.faults.ranks = vec![5];
        let why = crate::config::within_ranges(&plan).unwrap_err();
        assert!(why.contains("rank 5, outside the cell's 2 process(es)"), "{why}");
    }
}
