//! The op tables: for cells that differ only in their backend, each
//! category's and each op's time per backend against the reference backend and
//! its share of the step's gap ([`crate::ops::gap`]); for a profiled cell
//! with no other backend beside it, its slowest ops.

use crate::ops::{backend_groups, gap, Gap, GapRow, OpProfile, UNATTRIBUTED};
use crate::CellSummary;

/// Steps closer than this share of the reference's have no gap to share out.
pub const CLOSE: f64 = 0.05;

/// One group's tables, ready to print.
#[derive(Clone, Debug, PartialEq)]
pub struct OpTables {
    /// What the tables compare: the cells' shared label and the reference.
    pub title: String,
    /// Each backend's attributed share and profiling cost, one line each.
    pub coverage: Vec<String>,
    /// Header, then a row per category, not attributed, and the step.
    pub categories: Vec<Vec<String>>,
    /// Per backend other than the reference: its `top` ops by share of the gap.
    pub ops: Vec<(String, Vec<Vec<String>>)>,
}

/// `v` as `show` writes it, or `-` where it is not a finite figure.
fn or_dash(v: f64, show: impl Fn(f64) -> String) -> String {
    if v.is_finite() {
        show(v)
    } else {
        "-".into()
    }
}

fn ms(v: f64) -> String {
    or_dash(v, |v| format!("{v:.2}"))
}

fn times(v: f64) -> String {
    or_dash(v, |v| format!("{v:.2}×"))
}

fn pct(v: f64) -> String {
    or_dash(v, |v| format!("{v:.1} %"))
}

fn faults(v: f64) -> String {
    or_dash(v, |v| format!("{v:.0}"))
}

fn rate(v: f64) -> String {
    or_dash(v, |v| format!("{v:.1}"))
}

fn backend(c: &CellSummary) -> String {
    c.backend.clone().unwrap_or_else(|| c.shown().to_string())
}

/// What each backend's profile covers: the attributed share of its
/// profiled step, and what profiling cost against its plain steps.
fn coverage(c: &CellSummary, p: &OpProfile) -> String {
    let page_faults: f64 = p.rows.iter().map(|r| r.page_faults).sum();
    let mut line = format!(
        "{}: {} ms a profiled step over {} steps, {} attributed to ops, profiling cost {}, {} page faults a step ({:.0} MiB of fresh memory)",
        backend(c),
        ms(p.step_ms),
        p.steps,
        pct(100.0 * p.attributed_ms() / p.step_ms),
        or_dash(p.overhead_pct(), |v| format!("{v:+.1} %")),
        faults(page_faults),
        page_faults * p.page_bytes as f64 / f64::from(1u32 << 20),
    );
    if let Some(note) = &p.note {
        line.push_str(&format!(" ({note})"));
    }
    if !p.checks.is_empty() {
        let checks: Vec<String> = p
            .checks
            .iter()
            .map(|c| {
                let verdict = if c.agrees() {
                    String::new()
                } else if c.fresh_memory() {
                    format!(
                        ", beyond 15 %: {} page faults a step in the step, {} a run alone",
                        faults(c.profiled_page_faults),
                        faults(c.alone_page_faults)
                    )
                } else {
                    ", beyond 15 %".into()
                };
                let difference = or_dash(c.difference_pct(), |v| format!("{v:+.0} %"));
                format!(
                    "{} {} ms in the step, {} ms alone ({difference}{verdict})",
                    c.name,
                    ms(c.profiled_ms),
                    ms(c.alone_ms),
                )
            })
            .collect();
        line.push_str(&format!("; alone on the same backend: {}", checks.join("; ")));
    }
    line
}

/// The tables of every group of `cells` that differ only in backend, the
/// reference chosen as [`backend_groups`] does, each backend's `top` ops;
/// then a table of its `top` slowest ops for each profiled cell in no group.
pub fn op_tables(cells: &[&CellSummary], reference: Option<&str>, top: usize) -> Vec<OpTables> {
    let groups = backend_groups(cells, reference);
    let mut out: Vec<OpTables> = groups
        .iter()
        .filter_map(|g| {
            let profiled: Vec<Profiled<'_>> = g.iter().filter_map(|c| Some((*c, c.ops.as_ref()?))).collect();
            (profiled.len() > 1).then(|| group_tables(&profiled, top))
        })
        .collect();
    for c in cells {
        let Some(p) = &c.ops else { continue };
        if groups.iter().any(|g| g.iter().any(|m| m.cell == c.cell)) {
            continue;
        }
        let mut rows = vec![vec![
            "op".to_string(),
            "category".into(),
            "forward ms".into(),
            "backward ms".into(),
            "% of step".into(),
            "GFLOP/s".into(),
            "GB/s".into(),
            "page faults".into(),
        ]];
        let mut sorted: Vec<_> = p.rows.iter().collect();
        sorted.sort_by(|a, b| b.ms().total_cmp(&a.ms()));
        for r in sorted.into_iter().take(top) {
            rows.push(vec![
                r.name.clone(),
                r.category.label().into(),
                ms(r.forward_ms),
                ms(r.backward_ms),
                pct(100.0 * r.ms() / p.step_ms),
                rate(r.gflops()),
                rate(r.gbps()),
                faults(r.page_faults),
            ]);
        }
        let rest = 100.0 * p.unattributed_ms() / p.step_ms;
        rows.push(vec![
            UNATTRIBUTED.into(),
            "-".into(),
            ms(p.unattributed_ms()),
            "-".into(),
            pct(rest),
            "-".into(),
            "-".into(),
            "-".into(),
        ]);
        out.push(OpTables {
            title: format!("{}: its slowest ops", c.shown()),
            coverage: vec![coverage(c, p)],
            categories: Vec::new(),
            ops: vec![(backend(c), rows)],
        });
    }
    out
}

/// A cell of a group and its op profile.
type Profiled<'a> = (&'a CellSummary, &'a OpProfile);

/// One group's tables; the reference is its first cell, and it has two or more.
fn group_tables(group: &[Profiled<'_>], top: usize) -> OpTables {
    let (reference, reference_profile) = group[0];
    let others = &group[1..];
    let gaps: Vec<Gap> = others.iter().map(|(_, p)| gap(p, reference_profile)).collect();
    let ops = others
        .iter()
        .zip(&gaps)
        .map(|(&(c, own), g)| {
            (format!("{} against {}", backend(c), backend(reference)), ops_table(group[0], (c, own), g, top))
        })
        .collect();
    let mut coverage_lines = vec![coverage(reference, reference_profile)];
    for ((c, p), g) in others.iter().zip(&gaps) {
        let mut line = coverage(c, p);
        if close(g) {
            line.push_str(&format!(
                "; its step is within {:.0} % of {}'s: no gap to share out, its ops ranked by their difference",
                100.0 * CLOSE,
                backend(reference)
            ));
        }
        coverage_lines.push(line);
    }
    // What the group's cells share: the reference's label without its backend.
    let own = reference.backend.as_deref().unwrap_or_default();
    let shared: Vec<&str> = reference.shown().split(" · ").filter(|facet| *facet != own).collect();
    let shared = shared.join(" · ");
    OpTables {
        title: format!(
            "{}reference {} ({} ms a profiled step)",
            if shared.is_empty() { String::new() } else { format!("{shared}: ") },
            backend(reference),
            ms(reference_profile.step_ms)
        ),
        coverage: coverage_lines,
        categories: categories_table(group, &gaps),
        ops,
    }
}

/// Whether a gap is too small to share out: the two steps within [`CLOSE`].
fn close(g: &Gap) -> bool {
    ((g.step_ms - g.reference_step_ms) / g.reference_step_ms).abs() < CLOSE
}

/// A row's share of gap `g`, or `-` where the gap is too small to share out.
fn share(g: &Gap, v: f64) -> String {
    if close(g) {
        "-".into()
    } else {
        pct(v)
    }
}

/// The categories table: each category's time on the reference and on each
/// other backend with its ratio and share of that backend's gap (`gaps`,
/// in the group's order), not attributed, then the step.
fn categories_table(group: &[Profiled<'_>], gaps: &[Gap]) -> Vec<Vec<String>> {
    let (reference, reference_profile) = group[0];
    let mut header = vec!["category".to_string(), format!("{} ms", backend(reference))];
    for (c, _) in &group[1..] {
        header.push(format!("{} ms (×)", backend(c)));
        header.push(format!("{} share of gap", backend(c)));
    }
    let mut rows = vec![header];
    // Categories in the order of the first backend's gap, largest share
    // first, then any only a later backend has; not attributed last.
    let mut names: Vec<&GapRow> = Vec::new();
    for f in gaps.iter().flat_map(|g| &g.categories) {
        if !names.iter().any(|n| n.name == f.name) {
            names.push(f);
        }
    }
    names.sort_by_key(|f| f.name == UNATTRIBUTED);
    for f in names {
        let mut row = vec![f.name.clone(), ms(f.reference_ms)];
        for g in gaps {
            match g.categories.iter().find(|r| r.name == f.name) {
                Some(r) => row.extend([format!("{} ({})", ms(r.ms), times(r.ratio)), share(g, r.share_pct)]),
                None => row.extend(["-".into(), "-".into()]),
            }
        }
        rows.push(row);
    }
    let mut step = vec!["step".to_string(), ms(reference_profile.step_ms)];
    for g in gaps {
        step.extend([
            format!("{} ({})", ms(g.step_ms), times(g.step_ms / g.reference_step_ms)),
            share(g, 100.0),
        ]);
    }
    rows.push(step);
    rows
}

/// One backend's `top` ops against the reference: by share of gap `g`
/// (by their difference where the gap is too small to share out), each with
/// its achieved rates on `own` and its page faults on both.
fn ops_table(reference: Profiled<'_>, own: Profiled<'_>, g: &Gap, top: usize) -> Vec<Vec<String>> {
    let ((r_cell, r_profile), (cell, profile)) = (reference, own);
    let mut rows = vec![vec![
        "op".to_string(),
        "category".into(),
        format!("{} ms", backend(r_cell)),
        format!("{} ms", backend(cell)),
        "×".into(),
        "share of gap".into(),
        format!("{} GFLOP/s", backend(cell)),
        format!("{} GB/s", backend(cell)),
        "page faults (ref.)".into(),
    ]];
    let mut ranked: Vec<_> = g.ops.iter().collect();
    if close(g) {
        ranked.sort_by(|a, b| (b.ms - b.reference_ms).abs().total_cmp(&(a.ms - a.reference_ms).abs()));
    }
    for r in ranked.into_iter().take(top) {
        let mine = profile.rows.iter().find(|o| o.name == r.name);
        let theirs = r_profile.rows.iter().find(|o| o.name == r.name);
        let page_faults = match (mine, theirs) {
            (Some(o), Some(t)) => format!("{} ({})", faults(o.page_faults), faults(t.page_faults)),
            (Some(o), None) => faults(o.page_faults),
            _ => "-".into(),
        };
        rows.push(vec![
            r.name.clone(),
            r.category.map_or("-", |f| f.label()).into(),
            ms(r.reference_ms),
            ms(r.ms),
            times(r.ratio),
            share(g, r.share_pct),
            rate(mine.map_or(f64::NAN, |o| o.gflops())),
            rate(mine.map_or(f64::NAN, |o| o.gbps())),
            page_faults,
        ]);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{OpCategory, OpRow};

    fn row(name: &str, category: OpCategory, ms: f64) -> OpRow {
        OpRow {
            name: name.into(),
            op: name.into(),
            category,
            forward_ms: ms,
            backward_ms: 0.0,
            macs: 0,
            bytes: 0,
            page_faults: 0.0,
        }
    }

    /// Cell `cell` on `backend`: conv `conv` ms and bn `bn` ms of a `step_ms` step.
    fn cell(cell: &str, backend: &str, step_ms: f64, conv: f64, bn: f64) -> CellSummary {
        let mut c = crate::tables::bare_summary(cell);
        c.backend = Some(backend.into());
        c.axes.insert("backend".into(), backend.into());
        c.ops = Some(OpProfile {
            backend: backend.into(),
            steps: 3,
            step_ms,
            plain_step_ms: step_ms,
            rows: vec![row("conv", OpCategory::Convolution, conv), row("bn", OpCategory::Normalization, bn)],
            note: None,
            checks: Vec::new(),
            page_bytes: 4096,
        });
        c
    }

    #[test]
    fn a_group_is_set_against_pytorch_by_hand() {
        // flex 100 ms against pytorch 60: conv +30 (75 %), bn +10 (25 %), the rest 0.
        let (flex, torch) = (cell("a", "flex", 100.0, 60.0, 20.0), cell("b", "pytorch", 60.0, 30.0, 10.0));
        let tables = op_tables(&[&flex, &torch], None, 5);
        assert_eq!(tables.len(), 1);
        let t = &tables[0];
        assert!(t.title.contains("reference pytorch (60.00 ms"), "{}", t.title);
        assert_eq!(t.categories[0], ["category", "pytorch ms", "flex ms (×)", "flex share of gap"]);
        assert_eq!(t.categories[1], ["convolution", "30.00", "60.00 (2.00×)", "75.0 %"]);
        assert_eq!(t.categories[2], ["normalization", "10.00", "20.00 (2.00×)", "25.0 %"]);
        assert_eq!(t.categories.last().unwrap(), &["step", "60.00", "100.00 (1.67×)", "100.0 %"]);
        assert_eq!(t.ops[0].0, "flex against pytorch");
        assert_eq!(t.ops[0].1[1][..6], ["conv", "convolution", "30.00", "60.00", "2.00×", "75.0 %"]);
    }

    #[test]
    fn steps_within_five_percent_share_nothing_and_a_lone_cell_lists_its_slowest_ops() {
        let (tch, torch) = (cell("a", "tch", 62.0, 33.0, 9.0), cell("b", "pytorch", 60.0, 30.0, 10.0));
        let t = &op_tables(&[&tch, &torch], None, 5)[0];
        assert!(t.categories.iter().skip(1).all(|r| r[3] == "-"), "{:?}", t.categories);
        assert!(t.coverage[1].contains("within 5 %"), "{:?}", t.coverage);
        // Ranked by difference: conv +3 before bn −1.
        assert_eq!(t.ops[0].1[1][0], "conv");
        assert_eq!(t.ops[0].1[2][0], "bn");
        let alone = op_tables(&[&tch], None, 5);
        assert!(alone[0].title.ends_with("its slowest ops") && alone[0].categories.is_empty());
        assert_eq!(alone[0].ops[0].1[1][..2], ["conv", "convolution"]);
    }
}
