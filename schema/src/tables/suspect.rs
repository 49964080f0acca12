//! Figures a reader should not take at face value, each with its reason:
//! the HTML report marks them on its charts and in its tables.

use crate::stats::NOISY_PCT;
use crate::CellSummary;

/// Why `r`'s figures should not be taken at face value, a short phrase
/// each (shown beside the figure), empty when nothing is suspect:
///
/// Formula: suspect = invented by --mock; or images/s variation_pct > 5 % over two repeats or more; or an outlier repeat; or weak scaling efficiency > 100 %.
///
/// Weak scaling above 100 % means each replica ran faster than the
/// 1-replica cell it is measured against: the baseline was slowed (noise,
/// its input pipeline, a cold start) or the cells differ in more than their
/// replicas, not that data parallelism made each replica faster.
pub fn suspect(r: &CellSummary) -> Vec<String> {
    let mut why = Vec::new();
    if r.mock {
        why.push("mock: invented by --mock, nothing measured".to_string());
    }
    if let Some(s) = r.images_per_s.filter(|s| s.n > 1 && s.variation_pct > NOISY_PCT) {
        why.push(format!("noisy: img/s varies {:.1} % across {} repeats", s.variation_pct, s.n));
    }
    if !r.outliers.is_empty() {
        let list: Vec<String> = r.outliers.iter().map(|k| format!("#{k}")).collect();
        why.push(format!("outlier repeat {}", list.join(", ")));
    }
    if let Some(x) = r.weak_scaling.as_ref().filter(|x| x.efficiency.median > 1.0) {
        why.push(format!(
            "weak scaling {:.0} % > 100 %: each replica beat its 1-replica baseline",
            100.0 * x.efficiency.median
        ));
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Scaling, Spread};

    #[test]
    fn each_reason_is_given_and_a_plain_cell_has_none() {
        let mut r = crate::tables::bare_summary("c");
        r.images_per_s = Spread::of(&[100.0, 100.0, 100.0]);
        assert!(suspect(&r).is_empty());
        // Repeats 90, 100, 110: MAD 10, 1.4826 × 10 / 100 = 14.8 %.
        r.images_per_s = Spread::of(&[90.0, 100.0, 110.0]);
        r.outliers = vec![3];
        r.mock = true;
        let scaling = |e: f64| Scaling {
            efficiency: Spread::of(&[e]).unwrap(),
            baseline_cell: "b".into(),
            baseline_images_per_s: 50.0,
            baseline_batch: 32,
            replicas: 2,
        };
        r.weak_scaling = Some(scaling(1.24));
        assert_eq!(
            suspect(&r),
            [
                "mock: invented by --mock, nothing measured",
                "noisy: img/s varies 14.8 % across 3 repeats",
                "outlier repeat #3",
                "weak scaling 124 % > 100 %: each replica beat its 1-replica baseline",
            ]
        );
        // Exactly linear is not suspect, nor one repeat however it varies.
        let one = Spread { n: 1, median: 7.0, mad: 3.0, min: 7.0, max: 7.0, variation_pct: 63.5 };
        r = CellSummary { weak_scaling: Some(scaling(1.0)), images_per_s: Some(one), ..r };
        r.outliers.clear();
        r.mock = false;
        assert!(suspect(&r).is_empty(), "{:?}", suspect(&r));
    }
}
