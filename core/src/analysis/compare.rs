//! `benchkit compare`'s figures: two results directories, cell by cell. The median
//! images/s of the new run over the baseline's, with a 95 % bootstrap
//! confidence interval of that ratio (and Welch's t-test) over the repeats.
//! A cell regresses when the whole interval lies below `1 − threshold`,
//! improves when it lies above `1 + threshold`, and is unchanged when it
//! lies inside; otherwise the comparison is inconclusive and says about how
//! many more repeats would decide. With one repeat on a side there is no
//! interval, and the threshold alone judges. Cells of the same id that
//! trained differently (another backend, engine, float format, collective
//! or model, or on another kind of machine) are no regression or
//! improvement of each other: the row says what differs instead, and the
//! ratio and each side's cost per epoch set the two side by side. The
//! table is drawn in `report::compare`.

use crate::measure::welch_p;
use benchkit_schema::bootstrap::{ratio_interval, repeats_to_decide, DRAWS};
use benchkit_schema::machine;
use benchkit_schema::CellRecord;
use benchkit_schema::{CellStatus, CellSummary};
use serde::Serialize;

/// What the comparison says about one cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Slower beyond the threshold, with the whole interval (or, with one
    /// repeat, the ratio) beyond it.
    Regression,
    /// Faster beyond the threshold, likewise.
    Improvement,
    /// Within the threshold, with the whole interval inside it.
    Unchanged,
    /// The interval straddles an edge of the threshold; about
    /// `more_repeats` more repeats a side would decide (none can when the
    /// ratio sits on the edge).
    Inconclusive {
        more_repeats: Option<usize>,
    },
    /// Ran in the baseline, failed in the new run.
    NowFails,
    /// Failed in the baseline, runs now.
    NowRuns,
    /// Failed in both.
    Failed,
    /// Both ran, but not alike: the row's `differs` says how.
    Differs,
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
    /// Its 95 % bootstrap confidence interval; `None` with fewer than two repeats on a side.
    pub ratio_interval: Option<[f64; 2]>,
    /// Welch's t-test over the repeats; `None` with fewer than two on a side.
    pub p_value: Option<f64>,
    pub baseline_accuracy: Option<f64>,
    pub new_accuracy: Option<f64>,
    /// Median cost of an epoch on each side's machine (`[cost]`).
    pub baseline_usd_per_epoch: Option<f64>,
    pub new_usd_per_epoch: Option<f64>,
    pub verdict: Verdict,
    /// How the two cells trained differently, e.g. "backend flex → tch".
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub differs: Vec<String>,
}

/// The comparison of two runs.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// Relative slow-down that counts as a regression, e.g. 0.05.
    pub threshold: f64,
    pub rows: Vec<CompareRow>,
    /// The kinds of machine the two runs' cells ran on, where there are
    /// several; a row's `differs` names them `m1`, `m2`, ….
    pub machines: Vec<String>,
}

/// The verdict on a ratio `r`, from its interval where there is one
/// (from `repeats` a side), else from the ratio alone.
///
/// Formula: regression if the interval lies wholly below 1 − threshold, improvement if wholly
/// above 1 + threshold, unchanged if wholly inside; else inconclusive.
fn judge(r: f64, interval: Option<(f64, f64)>, threshold: f64, repeats: usize) -> Verdict {
    let (low, high) = (1.0 - threshold, 1.0 + threshold);
    match interval {
        None if r < low => Verdict::Regression,
        None if r > high => Verdict::Improvement,
        None => Verdict::Unchanged,
        Some((_, hi)) if hi < low => Verdict::Regression,
        Some((lo, _)) if lo > high => Verdict::Improvement,
        Some((lo, hi)) if lo >= low && hi <= high => Verdict::Unchanged,
        Some(interval) => {
            Verdict::Inconclusive { more_repeats: repeats_to_decide(r, interval, threshold, repeats) }
        }
    }
}

/// The resampling seed of a cell: its id's FNV-1a hash, so a comparison
/// always draws the same interval.
fn seed_of(cell: &str) -> u64 {
    crate::hash::fnv1a(cell.as_bytes())
}

/// What two runs of a cell must share for their speeds to judge a change:
/// each as "key old → new" where they do not.
fn differences(baseline: &CellRecord, new: &CellRecord, machines: &[String]) -> Vec<String> {
    let (Some(b), Some(n)) = (baseline.repeats.first(), new.repeats.first()) else {
        return Vec::new();
    };
    let engine =
        |r: &benchkit_schema::CellResult| r.engine.as_ref().map_or("burn".to_string(), |e| e.name.clone());
    let collective = |r: &benchkit_schema::CellResult| match r.parallel.replicas {
        0 | 1 => "none".to_string(),
        _ => r.parallel.collective.clone(),
    };
    let pairs = [
        ("backend", b.backend.clone(), n.backend.clone()),
        ("engine", engine(b), engine(n)),
        ("precision", b.precision.clone(), n.precision.clone()),
        ("collective", collective(b), collective(n)),
        ("model", b.model.clone(), n.model.clone()),
    ];
    let machine = |r: &CellRecord| r.summary.as_ref().and_then(|s| s.machine.as_ref()).cloned();
    let machine = match (machine(baseline), machine(new)) {
        (Some(b), Some(n)) if b.kind() != n.kind() => {
            Some(("machine", machine::tag(machines, Some(&b)), machine::tag(machines, Some(&n))))
        }
        _ => None,
    };
    pairs
        .into_iter()
        .chain(machine)
        .filter(|(_, old, new)| old != new)
        .map(|(key, old, new)| format!("{key} {old} → {new}"))
        .collect()
}

fn ok(r: &CellRecord) -> Option<&CellSummary> {
    r.summary.as_ref().filter(|s| s.status == CellStatus::Ok && s.images_per_s.is_some())
}

impl Comparison {
    /// Compare every cell of `new` with the cell of the same id in `baseline`.
    ///
    /// Formula: ratio = new median images/s / baseline median images/s.
    pub fn of(baseline: &[CellRecord], new: &[CellRecord], threshold: f64) -> Self {
        let machines = machine::distinct_kinds(
            baseline.iter().chain(new).map(|r| r.summary.as_ref().and_then(|s| s.machine.as_ref())),
        );
        let usd = |s: Option<&CellSummary>| s.and_then(|s| s.usd_per_epoch).map(|u| u.median);
        let mut rows = Vec::new();
        for n in new {
            let b = baseline.iter().find(|b| b.cell == n.cell);
            // Repeats with no measured speed are no sample of it.
            let speeds = |r: &CellRecord| {
                r.repeats.iter().map(|x| x.images_per_s).filter(|s| s.is_finite()).collect::<Vec<_>>()
            };
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
            let interval = match (b, bs.is_some() && ns.is_some()) {
                (Some(b), true) => ratio_interval(&speeds(b), &speeds(n), DRAWS, seed_of(&n.cell)),
                _ => None,
            };
            let repeats = b.map_or(0, |b| speeds(b).len().min(speeds(n).len()));
            let differs = b.map_or_else(Vec::new, |b| differences(b, n, &machines));
            let verdict = match (b, bs.is_some(), ns.is_some(), ratio) {
                (None, ..) => Verdict::OnlyNew,
                (Some(_), true, true, _) if !differs.is_empty() => Verdict::Differs,
                (Some(_), true, false, _) => Verdict::NowFails,
                (Some(_), false, true, _) => Verdict::NowRuns,
                (Some(_), false, false, _) => Verdict::Failed,
                (Some(_), true, true, Some(r)) => judge(r, interval, threshold, repeats),
                _ => Verdict::Unchanged,
            };
            rows.push(CompareRow {
                cell: n.cell.clone(),
                baseline_images_per_s: median(bs),
                new_images_per_s: median(ns),
                ratio,
                ratio_interval: interval.map(|(lo, hi)| [lo, hi]),
                p_value,
                baseline_accuracy: accuracy(bs),
                new_accuracy: accuracy(ns),
                baseline_usd_per_epoch: usd(bs),
                new_usd_per_epoch: usd(ns),
                verdict,
                differs,
            });
        }
        for b in baseline.iter().filter(|b| !new.iter().any(|n| n.cell == b.cell)) {
            rows.push(CompareRow {
                cell: b.cell.clone(),
                baseline_images_per_s: ok(b).and_then(|s| s.images_per_s).map(|s| s.median),
                new_images_per_s: None,
                ratio: None,
                ratio_interval: None,
                p_value: None,
                baseline_accuracy: ok(b).and_then(|s| s.final_test_accuracy).map(|s| s.median),
                new_accuracy: None,
                baseline_usd_per_epoch: usd(ok(b)),
                new_usd_per_epoch: None,
                verdict: Verdict::OnlyBaseline,
                differs: Vec::new(),
            });
        }
        Self { threshold, rows, machines }
    }

    /// Cells that got slower beyond the threshold, or stopped running.
    pub fn regressions(&self) -> usize {
        self.rows.iter().filter(|r| matches!(r.verdict, Verdict::Regression | Verdict::NowFails)).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchkit_schema::CellResult;

    /// Repeat `number` of `cell`, measured at `ips` images/s.
    fn repeat(cell: &str, number: u32, ips: f64) -> CellResult {
        crate::analysis::sample_result(cell, number, 100, 100, 100.0 / ips)
    }

    fn record(cell: &str, speeds: &[f64], failure: Option<&str>) -> CellRecord {
        let repeats: Vec<CellResult> =
            speeds.iter().enumerate().map(|(i, &s)| repeat(cell, i as u32 + 1, s)).collect();
        record_of(cell, repeats, failure)
    }

    fn record_of(cell: &str, repeats: Vec<CellResult>, failure: Option<&str>) -> CellRecord {
        let summary = CellSummary::of(0, cell, &Default::default(), &repeats, failure);
        CellRecord {
            index: 0,
            cell: cell.into(),
            axes: Default::default(),
            repeats_asked: repeats.len().max(1) as u32,
            repeats,
            failures: Vec::new(),
            summary: Some(summary),
            machine: None,
        }
    }

    fn verdict(base: &[f64], new: &[f64]) -> Verdict {
        Comparison::of(&[record("c", base, None)], &[record("c", new, None)], 0.05).rows[0].verdict
    }

    #[test]
    fn the_interval_decides_against_the_threshold() {
        assert_eq!(verdict(&[100.0, 101.0, 99.0], &[90.0, 91.0, 89.0]), Verdict::Regression);
        assert_eq!(verdict(&[100.0, 101.0, 99.0], &[110.0, 111.0, 109.0]), Verdict::Improvement);
        assert_eq!(verdict(&[100.0, 101.0, 99.0], &[98.0, 99.0, 97.0]), Verdict::Unchanged, "within 5 %");
        assert_eq!(verdict(&[100.0], &[90.0]), Verdict::Regression, "one repeat: the threshold alone");
        // 10 % slower, but the repeats spread ±20 %: neither a pass nor a fail.
        let Verdict::Inconclusive { more_repeats: Some(k) } =
            verdict(&[100.0, 80.0, 120.0], &[90.0, 70.0, 110.0])
        else {
            panic!("inconclusive")
        };
        assert!(k > 3, "{k}");
        // 3 % slower, but the interval reaches past 5 %: a pass would be false.
        let v = verdict(&[100.0, 97.0, 103.0, 100.0], &[97.0, 94.0, 100.0, 97.0]);
        assert!(matches!(v, Verdict::Inconclusive { more_repeats: Some(_) }), "{v:?}");
        let cmp = Comparison::of(
            &[record("c", &[100.0, 80.0, 120.0], None)],
            &[record("c", &[90.0, 70.0, 110.0], None)],
            0.05,
        );
        let [lo, hi] = cmp.rows[0].ratio_interval.unwrap();
        assert!(lo < 0.9 && hi > 1.05, "{lo}–{hi}");
        assert!(cmp.render().contains("inconclusive: about"), "{}", cmp.render());
        assert_eq!(cmp.regressions(), 0, "inconclusive is not a regression");
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

    /// A cell that trained on another backend, engine or float format is
    /// not called faster or slower: the row says what differs.
    #[test]
    fn cells_that_trained_differently_are_not_judged() {
        let base = record("c", &[100.0, 101.0, 99.0], None);
        let retrained = |change: &dyn Fn(&mut CellResult)| {
            let mut repeats: Vec<CellResult> =
                [50.0, 51.0, 49.0].iter().enumerate().map(|(i, &s)| repeat("c", i as u32 + 1, s)).collect();
            repeats.iter_mut().for_each(change);
            record_of("c", repeats, None)
        };
        let tch = retrained(&|r| r.backend = "tch".into());
        let cmp = Comparison::of(std::slice::from_ref(&base), &[tch], 0.05);
        assert_eq!(cmp.rows[0].verdict, Verdict::Differs);
        assert_eq!(cmp.rows[0].differs, ["backend flex → tch"]);
        assert!((cmp.rows[0].ratio.unwrap() - 0.5).abs() < 1e-9, "the ratio is still shown");
        assert_eq!(cmp.regressions(), 0, "another backend is no regression");
        assert!(cmp.render().contains("not alike: backend flex → tch"), "{}", cmp.render());

        let compiled = retrained(&|r| {
            r.backend = "pytorch".into();
            r.precision = "bf16".into();
            r.engine =
                Some(benchkit_schema::Engine { name: "pytorch 2.9.0 compiled".into(), ..Default::default() });
        });
        let cmp = Comparison::of(std::slice::from_ref(&base), &[compiled], 0.05);
        assert_eq!(
            cmp.rows[0].differs,
            ["backend flex → pytorch", "engine burn → pytorch 2.9.0 compiled", "precision f32 → bf16"]
        );
        let same = retrained(&|_| {});
        let cmp = Comparison::of(&[base], &[same], 0.05);
        assert_eq!(cmp.rows[0].verdict, Verdict::Regression, "alike cells are judged");
    }
}
