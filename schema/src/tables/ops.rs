//! The op tables: for cells that differ only in their backend, each
//! category's and each op's time per backend against the reference backend and
//! its share of the step's gap ([`crate::ops::gap`]); for a profiled cell
//! with no other backend beside it, its slowest ops.

use crate::ops::{backend_groups, gap, OpProfile, UNATTRIBUTED};
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

fn ms(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        "-".into()
    }
}

fn times(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}×")
    } else {
        "-".into()
    }
}

fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1} %")
    } else {
        "-".into()
    }
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
        if p.overhead_pct().is_finite() { format!("{:+.1} %", p.overhead_pct()) } else { "-".into() },
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
                let difference = c.difference_pct();
                let difference =
                    if difference.is_finite() { format!("{difference:+.0} %") } else { "-".into() };
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
    let mut out: Vec<OpTables> = groups.iter().map(|g| group_tables(g, top)).collect();
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

fn faults(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.0}")
    } else {
        "-".into()
    }
}

fn rate(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "-".into()
    }
}

/// One group's tables; the reference is its first cell.
fn group_tables(group: &[&CellSummary], top: usize) -> OpTables {
    let profile = |c: &CellSummary| {
        c.ops.clone().unwrap_or_else(|| OpProfile {
            backend: String::new(),
            steps: 0,
            step_ms: f64::NAN,
            plain_step_ms: f64::NAN,
            rows: Vec::new(),
            note: None,
            checks: Vec::new(),
            page_bytes: 4096,
        })
    };
    let reference = group[0];
    let reference_profile = profile(reference);
    let others = &group[1..];
    let gaps: Vec<_> = others.iter().map(|c| gap(&profile(c), &reference_profile)).collect();
    // Within this of the reference's step, a gap is too small to share out.
    let close = |g: &crate::ops::Gap| ((g.step_ms - g.reference_step_ms) / g.reference_step_ms).abs() < CLOSE;
    let share = |g: &crate::ops::Gap, v: f64| if close(g) { "-".to_string() } else { pct(v) };
    let mut header = vec!["category".to_string(), format!("{} ms", backend(reference))];
    for c in others {
        header.push(format!("{} ms (×)", backend(c)));
        header.push(format!("{} share of gap", backend(c)));
    }
    let mut categories = vec![header];
    // Categories in the order of the first backend's gap, largest share
    // first, then any only a later backend has; not attributed last.
    let mut names: Vec<&crate::ops::GapRow> = Vec::new();
    for f in gaps.iter().flat_map(|g| &g.categories) {
        if !names.iter().any(|n| n.name == f.name) {
            names.push(f);
        }
    }
    names.sort_by_key(|f| f.name == UNATTRIBUTED);
    for f in names {
        let mut row = vec![f.name.clone(), ms(f.reference_ms)];
        for g in &gaps {
            match g.categories.iter().find(|r| r.name == f.name) {
                Some(r) => row.extend([format!("{} ({})", ms(r.ms), times(r.ratio)), share(g, r.share_pct)]),
                None => row.extend(["-".into(), "-".into()]),
            }
        }
        categories.push(row);
    }
    let mut step = vec!["step".to_string(), ms(reference_profile.step_ms)];
    for g in &gaps {
        step.extend([
            format!("{} ({})", ms(g.step_ms), times(g.step_ms / g.reference_step_ms)),
            share(g, 100.0),
        ]);
    }
    categories.push(step);
    let ops = others
        .iter()
        .zip(&gaps)
        .map(|(c, g)| {
            let own = profile(c);
            let mut rows = vec![vec![
                "op".to_string(),
                "category".into(),
                format!("{} ms", backend(reference)),
                format!("{} ms", backend(c)),
                "×".into(),
                "share of gap".into(),
                format!("{} GFLOP/s", backend(c)),
                format!("{} GB/s", backend(c)),
                "page faults (ref.)".into(),
            ]];
            let mut ranked: Vec<_> = g.ops.iter().collect();
            if close(g) {
                ranked
                    .sort_by(|a, b| (b.ms - b.reference_ms).abs().total_cmp(&(a.ms - a.reference_ms).abs()));
            }
            for r in ranked.into_iter().take(top) {
                let own_row = own.rows.iter().find(|o| o.name == r.name);
                let theirs = reference_profile.rows.iter().find(|o| o.name == r.name);
                let page_faults = match (own_row, theirs) {
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
                    rate(own_row.map_or(f64::NAN, |o| o.gflops())),
                    rate(own_row.map_or(f64::NAN, |o| o.gbps())),
                    page_faults,
                ]);
            }
            (format!("{} against {}", backend(c), backend(reference)), rows)
        })
        .collect();
    let mut coverage_lines = vec![coverage(reference, &reference_profile)];
    for (c, g) in others.iter().zip(&gaps) {
        let mut line = coverage(c, &profile(c));
        if close(g) {
            line.push_str(&format!(
                "; its step is within {:.0} % of {}'s: no gap to share out, its ops ranked by their difference",
                100.0 * CLOSE,
                backend(reference)
            ));
        }
        coverage_lines.push(line);
    }
    let mut shared = reference.shown().to_string();
    if let Some(b) = reference.backend.as_deref() {
        shared = shared.replace(b, "").trim_matches(|ch: char| ch == ' ' || ch == '·').to_string();
    }
    OpTables {
        title: format!(
            "{}reference {} ({} ms a profiled step)",
            if shared.is_empty() { String::new() } else { format!("{shared}: ") },
            backend(reference),
            ms(reference_profile.step_ms)
        ),
        coverage: coverage_lines,
        categories,
        ops,
    }
}
