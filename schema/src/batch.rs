//! `batch_size = "max"`: the short trials that found the largest batch a
//! cell trains at, each in a fresh process, and the batch chosen.

use serde::{Deserialize, Serialize};

/// One trial: a warm-up step and a measured one at `batch`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct BatchTrial {
    pub batch: usize,
    /// Whether it trained without running out of memory.
    pub fits: bool,
    /// The measured step's images per second (NaN when it did not fit).
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub images_per_s: f64,
    /// The trial process's peak resident memory, in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_mib: Option<f64>,
    /// The most device memory its GPUs held, in MiB (GPU cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_mib: Option<f64>,
    /// Why it did not fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The search: every trial in the order run, and the batch the cell then trained at.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct BatchSearchReport {
    pub chosen: usize,
    pub trials: Vec<BatchTrial>,
}

impl BatchSearchReport {
    /// Search from `start` images, doubling while a trial fits (up to
    /// `largest`), then halving the gap between the largest batch that fit
    /// and the smallest that did not, on multiples of `unit`, until it is
    /// within a sixteenth of the former. `trial` runs one batch; its error
    /// (a failure that is not running out of memory) ends the search.
    pub fn search(
        start: usize,
        unit: usize,
        largest: usize,
        mut trial: impl FnMut(usize) -> Result<BatchTrial, String>,
    ) -> Result<Self, String> {
        let unit = unit.max(1);
        let mut trials: Vec<BatchTrial> = Vec::new();
        let (mut fit, mut failed) = (None, None);
        let mut batch = start.max(unit);
        while batch <= largest {
            let t = trial(batch)?;
            let fits = t.fits;
            trials.push(t);
            if !fits {
                failed = Some(batch);
                break;
            }
            fit = Some(batch);
            batch *= 2;
        }
        let Some(mut lo) = fit else {
            let why = trials.last().and_then(|t| t.reason.clone()).unwrap_or_default();
            return Err(format!("not even the first batch tried, {}, trains: {why}", start.max(unit)));
        };
        if let Some(mut hi) = failed {
            loop {
                let mid = (lo + hi) / 2 / unit * unit;
                if hi - lo <= (lo / 16).max(unit) || mid <= lo || mid >= hi {
                    break;
                }
                let t = trial(mid)?;
                if t.fits {
                    lo = mid;
                } else {
                    hi = mid;
                }
                trials.push(t);
            }
        }
        Ok(Self { chosen: lo, trials })
    }

    /// One line: the batch chosen and each trial, e.g. `96 (8 ✓, 16 ✓, …, 128 ✗)`.
    pub fn line(&self) -> String {
        let tried: Vec<String> =
            self.trials.iter().map(|t| format!("{} {}", t.batch, if t.fits { "✓" } else { "✗" })).collect();
        let smallest = self.trials.iter().filter(|t| !t.fits).min_by_key(|t| t.batch);
        match smallest.and_then(|t| Some((t.batch, t.reason.as_deref()?))) {
            Some((batch, why)) => format!("{} (tried {}; {batch}: {why})", self.chosen, tried.join(", ")),
            None => format!("{} (tried {}; the largest tried)", self.chosen, tried.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trial on a machine where batches above `limit` run out of memory.
    fn machine(limit: usize) -> impl FnMut(usize) -> Result<BatchTrial, String> {
        move |batch| {
            let fits = batch <= limit;
            Ok(BatchTrial {
                batch,
                fits,
                images_per_s: if fits { batch as f64 } else { f64::NAN },
                peak_rss_mib: None,
                gpu_memory_mib: None,
                reason: (!fits).then(|| "out of memory".into()),
            })
        }
    }

    #[test]
    fn doubles_then_narrows_to_within_a_sixteenth() {
        let s = BatchSearchReport::search(8, 8, 1 << 16, machine(700)).unwrap();
        let tried: Vec<usize> = s.trials.iter().map(|t| t.batch).collect();
        assert_eq!(&tried[..8], [8, 16, 32, 64, 128, 256, 512, 1024]);
        assert!(s.chosen <= 700 && s.chosen >= 700 - 700 / 16, "{}: {tried:?}", s.chosen);
        assert!(s.chosen.is_multiple_of(8));
        assert!(s.trials.iter().all(|t| t.fits == (t.batch <= 700)));
        assert!(s.line().starts_with(&format!("{} (tried 8 ✓", s.chosen)), "{}", s.line());
    }

    #[test]
    fn stops_at_the_largest_and_fails_when_nothing_fits() {
        let s = BatchSearchReport::search(8, 8, 64, machine(10_000)).unwrap();
        assert_eq!(s.chosen, 64);
        assert_eq!(s.trials.len(), 4);
        assert!(s.line().ends_with("the largest tried)"), "{}", s.line());
        let err = BatchSearchReport::search(8, 8, 64, machine(4)).unwrap_err();
        assert_eq!(err, "not even the first batch tried, 8, trains: out of memory");
        // Two replicas: multiples of 2 × 8.
        let s = BatchSearchReport::search(16, 16, 1 << 16, machine(200)).unwrap();
        assert!(s.trials.iter().all(|t| t.batch.is_multiple_of(16)));
        assert!((176..=200).contains(&s.chosen), "{}", s.chosen);
    }

    #[test]
    fn another_failure_ends_the_search() {
        let err = BatchSearchReport::search(8, 8, 1 << 16, |b| {
            if b < 64 {
                machine(1000)(b)
            } else {
                Err("the plugin trapped".into())
            }
        })
        .unwrap_err();
        assert_eq!(err, "the plugin trapped");
    }
}
