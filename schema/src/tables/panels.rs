//! Which cells share a chart: one panel for the run, or one per workload
//! (the model and data a cell trains) where their scales are too far apart
//! for one axis to show both.

use crate::CellSummary;

/// Above this ratio between workloads' largest figures, each workload gets
/// a panel of its own.
pub const PANEL_RATIO: f64 = 5.0;

/// `cells` in panels: each workload's cells (in their order, workloads in
/// order of first appearance) on a panel of their own when the workloads'
/// scales differ more than [`PANEL_RATIO`], else all on one. A cell without
/// the figure is kept with its workload but does not set its scale.
///
/// Formula: split when max_w(top_w) > 5 × min_w(top_w), top_w = the largest figure of workload w's cells.
pub fn panels<'a>(
    cells: &[&'a CellSummary],
    figure: impl Fn(&CellSummary) -> Option<f64>,
) -> Vec<Vec<&'a CellSummary>> {
    let mut groups: Vec<(Option<&str>, Vec<&'a CellSummary>)> = Vec::new();
    for &c in cells {
        let key = c.workload.as_deref().or(c.model.as_deref());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(c),
            None => groups.push((key, vec![c])),
        }
    }
    let tops: Vec<f64> = groups
        .iter()
        .filter_map(|(_, members)| {
            members.iter().filter_map(|c| figure(c)).filter(|v| v.is_finite() && *v > 0.0).reduce(f64::max)
        })
        .collect();
    let (lo, hi) = tops.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &t| (lo.min(t), hi.max(t)));
    if groups.len() > 1 && tops.len() > 1 && hi > PANEL_RATIO * lo {
        groups.into_iter().map(|(_, members)| members).collect()
    } else {
        vec![cells.to_vec()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(workload: &str, ips: f64) -> CellSummary {
        let mut s = crate::tables::bare_summary(workload);
        s.workload = Some(workload.into());
        s.images_per_s = crate::Spread::of(&[ips]);
        s
    }

    #[test]
    fn workloads_apart_by_more_than_five_times_get_a_panel_each() {
        let ips = |c: &CellSummary| c.images_per_s.map(|s| s.median);
        // ResNet's best 1,000 img/s against AlexNet's 150: 6.7× apart.
        let (r1, a1, r2) = (cell("resnet", 900.0), cell("alexnet", 150.0), cell("resnet", 1000.0));
        let split = panels(&[&r1, &a1, &r2], ips);
        let names: Vec<Vec<f64>> = split.iter().map(|p| p.iter().filter_map(|c| ips(c)).collect()).collect();
        assert_eq!(names, [vec![900.0, 1000.0], vec![150.0]]);
        // 1,000 against 250 is 4×: one panel, in the cells' order.
        let a2 = cell("alexnet", 250.0);
        let one = panels(&[&r1, &a2, &r2], ips);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].len(), 3);
        // Exactly 5× is not more than 5×; one workload is always one panel.
        let a3 = cell("alexnet", 200.0);
        assert_eq!(panels(&[&r2, &a3], ips).len(), 1);
        assert_eq!(panels(&[&r1, &r2], ips).len(), 1);
    }
}
