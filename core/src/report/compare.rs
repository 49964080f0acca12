//! `benchkit compare`: two results directories, cell by cell. The median
//! images/s of the new run over the baseline's, with Welch's t-test over the
//! repeats; a cell regresses when it is slower by more than the threshold
//! and the difference is significant (or cannot be tested: one repeat).

use super::{CellStatus, CellSummary};
use crate::measure::welch_p;
use crate::runner::CellRecord;
use serde::Serialize;
use std::fmt::Write;

/// Below this p-value a difference is taken as real.
pub const ALPHA: f64 = 0.05;

/// What the comparison says about one cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Slower beyond the threshold, significantly (or untestably).
    Regression,
    /// Faster beyond the threshold, significantly (or untestably).
    Improvement,
    /// Within the threshold.
    Unchanged,
    /// Beyond the threshold but not significant at [`ALPHA`].
    Noise,
    /// Ran in the baseline, failed in the new run.
    NowFails,
    /// Failed in the baseline, runs now.
    NowRuns,
    /// Failed in both.
    Failed,
    OnlyBaseline,
    OnlyNew,
}

/// One cell of the comparison.
#[derive(Clone, Debug, Serialize)]
pub struct CompareRow {
    pub cell: String,
    pub baseline_images_per_s: Option<f64>,
    pub new_images_per_s: Option<f64>,
    /// New median over baseline median.
    pub ratio: Option<f64>,
    /// Welch's t-test over the repeats; `None` with fewer than two on a side.
    pub p_value: Option<f64>,
    pub baseline_accuracy: Option<f64>,
    pub new_accuracy: Option<f64>,
    pub verdict: Verdict,
}

/// The comparison of two runs.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// Relative slow-down that counts as a regression, e.g. 0.05.
    pub threshold: f64,
    pub rows: Vec<CompareRow>,
}

fn ok(r: &CellRecord) -> Option<&CellSummary> {
    r.summary.as_ref().filter(|s| s.status == CellStatus::Ok && s.images_per_s.is_some())
}

impl Comparison {
    /// Compare every cell of `new` with the cell of the same id in `baseline`.
    pub fn of(baseline: &[CellRecord], new: &[CellRecord], threshold: f64) -> Self {
        let mut rows = Vec::new();
        for n in new {
            let b = baseline.iter().find(|b| b.cell == n.cell);
            let speeds = |r: &CellRecord| r.runs.iter().map(|x| x.images_per_s).collect::<Vec<_>>();
            let median = |s: Option<&CellSummary>| s.and_then(|s| s.images_per_s).map(|s| s.median);
            let accuracy = |s: Option<&CellSummary>| s.and_then(|s| s.final_test_accuracy).map(|s| s.median);
            let (bs, ns) = (b.and_then(ok), ok(n));
            let ratio = match (median(bs), median(ns)) {
                (Some(b), Some(n)) if b > 0.0 => Some(n / b),
                _ => None,
            };
            let p_value = match (b, bs.is_some() && ns.is_some()) {
                (Some(b), true) => welch_p(&speeds(b), &speeds(n)),
                _ => None,
            };
            let significant = p_value.is_none_or(|p| p < ALPHA);
            let verdict = match (b, bs.is_some(), ns.is_some(), ratio) {
                (None, ..) => Verdict::OnlyNew,
                (Some(_), true, false, _) => Verdict::NowFails,
                (Some(_), false, true, _) => Verdict::NowRuns,
                (Some(_), false, false, _) => Verdict::Failed,
                (Some(_), true, true, Some(r)) if r < 1.0 - threshold => {
                    if significant {
                        Verdict::Regression
                    } else {
                        Verdict::Noise
                    }
                }
                (Some(_), true, true, Some(r)) if r > 1.0 + threshold => {
                    if significant {
                        Verdict::Improvement
                    } else {
                        Verdict::Noise
                    }
                }
                _ => Verdict::Unchanged,
            };
            rows.push(CompareRow {
                cell: n.cell.clone(),
                baseline_images_per_s: median(bs),
                new_images_per_s: median(ns),
                ratio,
                p_value,
                baseline_accuracy: accuracy(bs),
                new_accuracy: accuracy(ns),
                verdict,
            });
        }
        for b in baseline.iter().filter(|b| !new.iter().any(|n| n.cell == b.cell)) {
            rows.push(CompareRow {
                cell: b.cell.clone(),
                baseline_images_per_s: ok(b).and_then(|s| s.images_per_s).map(|s| s.median),
                new_images_per_s: None,
                ratio: None,
                p_value: None,
                baseline_accuracy: ok(b).and_then(|s| s.final_test_accuracy).map(|s| s.median),
                new_accuracy: None,
                verdict: Verdict::OnlyBaseline,
            });
        }
        Self { threshold, rows }
    }

    /// Cells that got slower beyond the threshold, or stopped running.
    pub fn regressions(&self) -> usize {
        self.rows.iter().filter(|r| matches!(r.verdict, Verdict::Regression | Verdict::NowFails)).count()
    }

    /// The comparison as a table.
    pub fn render(&self) -> String {
        let num = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".to_string(), f);
        let mut table = vec![["cell", "baseline img/s", "new img/s", "ratio", "p", "acc Δ", "verdict"]
            .map(String::from)
            .to_vec()];
        for r in &self.rows {
            let delta = match (r.baseline_accuracy, r.new_accuracy) {
                (Some(b), Some(n)) => format!("{:+.2} pt", 100.0 * (n - b)),
                _ => "-".into(),
            };
            table.push(vec![
                r.cell.clone(),
                num(r.baseline_images_per_s, &|v| format!("{v:.1}")),
                num(r.new_images_per_s, &|v| format!("{v:.1}")),
                num(r.ratio, &|v| format!("{v:.3}×")),
                num(r.p_value, &|v| format!("{v:.3}")),
                delta,
                match r.verdict {
                    Verdict::Regression => "REGRESSION".into(),
                    Verdict::Improvement => "faster".into(),
                    Verdict::Unchanged => "unchanged".into(),
                    Verdict::Noise => format!("not significant (p ≥ {ALPHA})"),
                    Verdict::NowFails => "REGRESSION: now fails".into(),
                    Verdict::NowRuns => "now runs".into(),
                    Verdict::Failed => "failed in both".into(),
                    Verdict::OnlyBaseline => "only in baseline".into(),
                    Verdict::OnlyNew => "only in new".into(),
                },
            ]);
        }
        let mut out = super::table::render(&table, |c| c == 0 || c == 6);
        let untested = self.rows.iter().any(|r| r.ratio.is_some() && r.p_value.is_none());
        let _ = writeln!(
            out,
            "threshold {:.1} %; {} regression(s){}",
            100.0 * self.threshold,
            self.regressions(),
            if untested {
                "; cells with one repeat on a side are judged by the threshold alone (no t-test)"
            } else {
                ""
            }
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{CellMeta, CellResult};
    use crate::train::{StepRecord, TrainOutcome};

    /// A repeat measured at `ips` images/s.
    fn run(cell: &str, repeat: u32, ips: f64) -> CellResult {
        let meta = CellMeta {
            seed: 1,
            energy: None,
            cell: cell.into(),
            repeat,
            axes: Default::default(),
            model: "m".into(),
            backend: "flex".into(),
            forward_macs_per_image: 1,
            usd_per_hour: None,
            started_unix_ms: 0,
            mode: crate::config::Mode::Train,
            loader: Default::default(),
            accuracy_metric: "top-1".into(),
            train: crate::config::TrainPlan { batch_size: 100, ..Default::default() },
        };
        let step = StepRecord {
            epoch: 1,
            data_wait_s: 0.0,
            compute_s: 100.0 / ips,
            all_reduce_s: 0.0,
            images: 100,
            phases: None,
        };
        let outcome = TrainOutcome {
            steps: vec![step],
            warmup_steps: 0,
            epochs: Vec::new(),
            num_params: 1,
            gradient_bytes: 0,
            ranks: Vec::new(),
            replicas_agree: None,
            gpu: None,
            peak_rss_mib: None,
        };
        crate::report::cell_result(meta, &outcome, 1.0)
    }

    fn record(cell: &str, speeds: &[f64], failure: Option<&str>) -> CellRecord {
        let runs: Vec<CellResult> =
            speeds.iter().enumerate().map(|(i, &s)| run(cell, i as u32 + 1, s)).collect();
        let summary = CellSummary::of(0, cell, &Default::default(), &runs, failure);
        CellRecord {
            index: 0,
            cell: cell.into(),
            axes: Default::default(),
            repeats: speeds.len().max(1) as u32,
            runs,
            failures: Vec::new(),
            summary: Some(summary),
        }
    }

    fn verdict(base: &[f64], new: &[f64]) -> Verdict {
        Comparison::of(&[record("c", base, None)], &[record("c", new, None)], 0.05).rows[0].verdict
    }

    #[test]
    fn significance_decides_beyond_the_threshold() {
        assert_eq!(verdict(&[100.0, 101.0, 99.0], &[90.0, 91.0, 89.0]), Verdict::Regression);
        assert_eq!(verdict(&[100.0, 101.0, 99.0], &[110.0, 111.0, 109.0]), Verdict::Improvement);
        assert_eq!(
            verdict(&[100.0, 80.0, 120.0], &[90.0, 70.0, 110.0]),
            Verdict::Noise,
            "10 % slower, but noise"
        );
        assert_eq!(verdict(&[100.0, 101.0, 99.0], &[98.0, 99.0, 97.0]), Verdict::Unchanged, "within 5 %");
        assert_eq!(verdict(&[100.0], &[90.0]), Verdict::Regression, "one repeat: the threshold alone");
    }

    #[test]
    fn failures_and_missing_cells() {
        let ok = record("a", &[100.0, 100.0], None);
        let failed = record("a", &[], Some("killed"));
        let cmp = Comparison::of(std::slice::from_ref(&ok), std::slice::from_ref(&failed), 0.05);
        assert_eq!(cmp.rows[0].verdict, Verdict::NowFails);
        assert_eq!(cmp.regressions(), 1, "a cell that stops running is a regression");
        let cmp = Comparison::of(&[failed], &[record("b", &[1.0], None)], 0.05);
        let verdicts: Vec<Verdict> = cmp.rows.iter().map(|r| r.verdict).collect();
        assert_eq!(verdicts, [Verdict::OnlyNew, Verdict::OnlyBaseline]);
        assert_eq!(cmp.regressions(), 0);
    }
}
