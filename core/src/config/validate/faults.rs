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
            return self.err(
                ranks_span,
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
