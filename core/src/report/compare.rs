//! `benchkit compare`'s table: a [`Comparison`] as the terminal shows it.

use crate::analysis::compare::{Comparison, Verdict};
use std::fmt::Write;

impl Comparison {
    /// The comparison as a table.
    pub fn render(&self) -> String {
        let num = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".to_string(), f);
        let cost =
            self.rows.iter().any(|r| r.baseline_usd_per_epoch.is_some() || r.new_usd_per_epoch.is_some());
        let mut header = vec!["cell", "baseline img/s", "new img/s", "ratio", "95 % interval", "p", "acc Δ"];
        if cost {
            header.extend(["baseline $/epoch", "new $/epoch"]);
        }
        header.push("verdict");
        let last = header.len() - 1;
        let mut table = vec![header.into_iter().map(String::from).collect::<Vec<_>>()];
        for r in &self.rows {
            let delta = match (r.baseline_accuracy, r.new_accuracy) {
                (Some(b), Some(n)) => format!("{:+.2} pt", 100.0 * (n - b)),
                _ => "-".into(),
            };
            let mut row = vec![
                r.cell.clone(),
                num(r.baseline_images_per_s, &|v| format!("{v:.1}")),
                num(r.new_images_per_s, &|v| format!("{v:.1}")),
                num(r.ratio, &|v| format!("{v:.3}×")),
                r.ratio_interval.map_or("-".into(), |[lo, hi]| format!("{lo:.3}–{hi:.3}")),
                num(r.p_value, &|v| format!("{v:.3}")),
                delta,
            ];
            if cost {
                row.push(num(r.baseline_usd_per_epoch, &|v| format!("${v:.4}")));
                row.push(num(r.new_usd_per_epoch, &|v| format!("${v:.4}")));
            }
            row.push(match r.verdict {
                Verdict::Regression => "REGRESSION".into(),
                Verdict::Improvement => "faster".into(),
                Verdict::Unchanged => "unchanged".into(),
                Verdict::Inconclusive { more_repeats: Some(k) } => {
                    format!("inconclusive: about {k} more repeat(s) a side would decide")
                }
                Verdict::Inconclusive { more_repeats: None } => {
                    "inconclusive: the change sits at the threshold".into()
                }
                Verdict::NowFails => "REGRESSION: now fails".into(),
                Verdict::NowRuns => "now runs".into(),
                Verdict::Failed => "failed in both".into(),
                Verdict::Differs => format!("not alike: {}", r.differs.join(", ")),
                Verdict::OnlyBaseline => "only in baseline".into(),
                Verdict::OnlyNew => "only in new".into(),
            });
            table.push(row);
        }
        let mut out = super::table::render(&table, |c| c == 0 || c == last);
        for (i, kind) in self.machines.iter().enumerate() {
            let _ = writeln!(out, "m{}: {kind}", i + 1);
        }
        let untested = self.rows.iter().any(|r| r.ratio.is_some() && r.ratio_interval.is_none());
        let _ = writeln!(
            out,
            "threshold {:.1} %; {} regression(s){}",
            100.0 * self.threshold,
            self.regressions(),
            if untested {
                "; cells with one repeat on a side are judged by the threshold alone (no interval)"
            } else {
                ""
            }
        );
        out
    }
}
