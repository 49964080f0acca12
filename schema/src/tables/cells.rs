//! The cells table, defined once: one row per cell of medians over its
//! repeats. The terminal and the reporter plugins (Markdown, HTML, through
//! the SDK) draw these rows in their own markup. A column whose figure no
//! cell has is left out, so a CPU run shows no GPU columns. A header names
//! its column's unit; a cell holds the figure.

use crate::{machine, Bottleneck, CellStatus, CellSummary, InputBound, Mode, Spread};

/// The cells table: a header, then one row per cell in the order given.
#[derive(Clone, Debug, PartialEq)]
pub struct CellsTable {
    /// The header, then one row per cell.
    pub rows: Vec<Vec<String>>,
    /// Per column: whether it holds text (aligned left) rather than figures.
    pub text: Vec<bool>,
    /// The kinds of machine the cells ran on where there are several (a
    /// merged run's); the `machine` column holds their tags `m1`, `m2`, …,
    /// which [`machine::legend`] spells out.
    pub machines: Vec<String>,
}

/// What every row's figures are read against.
struct Context {
    /// Each workload's reference median images/s, for `rel`.
    bases: std::collections::BTreeMap<Option<String>, f64>,
    machines: Vec<String>,
}

/// One column: its header, whether it holds text, when it is shown, and
/// its value for one cell.
struct Column {
    header: &'static str,
    text: bool,
    shown: fn(&[&CellSummary], &Context) -> bool,
    value: fn(&CellSummary, &Context) -> String,
}

fn always(_: &[&CellSummary], _: &Context) -> bool {
    true
}

fn fixed(spread: &Option<Spread>, scale: f64, digits: usize) -> String {
    spread.map_or("-".into(), |s| format!("{:.digits$}", s.median * scale))
}

/// Whether the cells ran on more than one backend: then each one's CPU
/// threads are shown, since engines can size their pools differently.
fn backends_compared(rows: &[&CellSummary], _: &Context) -> bool {
    let mut backends = rows.iter().filter_map(|r| r.backend.as_deref());
    let first = backends.next();
    backends.any(|b| Some(b) != first)
}

fn parallel(rows: &[&CellSummary], _: &Context) -> bool {
    rows.iter().any(|r| r.replicas.is_some())
}

fn scaling(s: &Option<crate::Scaling>) -> String {
    s.as_ref().map_or("-".into(), |x| format!("{:.0}", 100.0 * x.efficiency.median))
}

/// The columns, in order.
const COLUMNS: &[Column] = &[
    Column { header: "cell", text: true, shown: always, value: |r, _| r.shown().to_string() },
    Column {
        header: "model",
        text: true,
        shown: always,
        value: |r, _| r.model.clone().unwrap_or_else(|| "-".into()),
    },
    Column {
        header: "machine",
        text: true,
        shown: |_, c| !c.machines.is_empty(),
        value: |r, c| machine::tag(&c.machines, r.machine.as_ref()),
    },
    Column { header: "img/s", text: false, shown: always, value: |r, _| fixed(&r.images_per_s, 1.0, 1) },
    Column {
        header: "± %",
        text: false,
        shown: |rows, _| rows.iter().any(|r| r.repeats > 1),
        value: |r, _| {
            r.images_per_s.filter(|s| s.n > 1).map_or("-".into(), |s| format!("{:.1}", s.variation_pct))
        },
    },
    Column {
        header: "rel",
        text: false,
        shown: always,
        value: |r, c| match (r.images_per_s, c.bases.get(&r.workload).copied()) {
            (Some(s), Some(b)) if b > 0.0 => format!("{:.2}×", s.median / b),
            _ => "-".into(),
        },
    },
    Column {
        header: "threads",
        text: false,
        shown: backends_compared,
        value: |r, _| r.threads.map_or("-".into(), |t| t.to_string()),
    },
    Column {
        header: "replicas",
        text: false,
        shown: parallel,
        value: |r, _| r.replicas.map_or("1".into(), |w| w.to_string()),
    },
    Column { header: "weak %", text: false, shown: parallel, value: |r, _| scaling(&r.weak_scaling) },
    Column { header: "strong %", text: false, shown: parallel, value: |r, _| scaling(&r.strong_scaling) },
    Column {
        header: "exposed comm. %",
        text: false,
        shown: parallel,
        value: |r, _| fixed(&r.exposed_communication_pct, 1.0, 1),
    },
    Column { header: "step p50 ms", text: false, shown: always, value: |r, _| fixed(&r.step_p50_ms, 1.0, 1) },
    Column { header: "step p90 ms", text: false, shown: always, value: |r, _| fixed(&r.step_p90_ms, 1.0, 1) },
    Column {
        header: "data wait %",
        text: false,
        shown: always,
        value: |r, _| fixed(&r.data_wait_pct, 1.0, 1),
    },
    Column { header: "input", text: true, shown: always, value: |r, _| input_bound(r).into() },
    Column {
        header: "bottleneck",
        text: true,
        shown: always,
        value: |r, _| match (&r.verdict, &r.straggler) {
            (Some(v), Some(s)) if v.bottleneck == Bottleneck::Straggler => {
                format!("straggler: rank {} ({})", s.rank, s.cause.name())
            }
            (Some(v), _) => v.bottleneck.label().into(),
            (None, _) => "-".into(),
        },
    },
    Column {
        header: "gpu util % (min)",
        text: false,
        shown: |rows, _| rows.iter().any(|r| r.gpu_util_pct.is_some()),
        value: |r, _| match (r.gpu_util_pct, r.gpu_util_min_pct) {
            (Some(mean), Some(min)) => format!("{:.0} ({:.0})", mean.median, min.median),
            _ => "-".into(),
        },
    },
    Column {
        header: "peak mem MiB",
        text: false,
        shown: |rows, _| rows.iter().any(|r| r.peak_rss_mib.is_some()),
        value: |r, _| fixed(&r.peak_rss_mib, 1.0, 0),
    },
    Column {
        header: "gpu mem MiB",
        text: false,
        shown: |rows, _| rows.iter().any(|r| r.gpu_memory_mib.is_some()),
        value: |r, _| fixed(&r.gpu_memory_mib, 1.0, 0),
    },
    Column {
        header: "J/img",
        text: false,
        shown: |rows, _| rows.iter().any(|r| r.joules_per_image.is_some()),
        value: |r, _| fixed(&r.joules_per_image, 1.0, 3),
    },
    Column {
        header: "compile s",
        text: false,
        shown: |rows, _| rows.iter().any(|r| r.compile_s.is_some()),
        value: |r, _| match (&r.compile_s, &r.kernel_cache) {
            (Some(s), Some(cache)) => format!("{:.1} ({cache})", s.median),
            (Some(s), None) => format!("{:.1}", s.median),
            _ => "-".into(),
        },
    },
    Column {
        header: "test acc %",
        text: false,
        shown: always,
        value: |r, _| fixed(&r.final_test_accuracy, 100.0, 2),
    },
    Column {
        header: "to target s",
        text: false,
        shown: |rows, _| rows.iter().any(|r| r.target_accuracy.is_some()),
        value: |r, _| match (&r.time_to_target_s, r.target_accuracy) {
            (Some(t), _) => format!("{:.1} ({}/{})", t.median, r.target_reached, r.repeats),
            (None, Some(_)) if r.repeats > 0 => "not reached".into(),
            _ => "-".into(),
        },
    },
    Column {
        header: "$/epoch",
        text: false,
        shown: |rows, _| rows.iter().any(|r| r.usd_per_epoch.is_some()),
        value: |r, _| fixed(&r.usd_per_epoch, 1.0, 4),
    },
    Column { header: "status", text: true, shown: always, value: |r, _| status(r) },
];

/// Every column's header, in order, whether or not a run shows it: each
/// is a figure the book's Figures page (`docs/src/concepts/figures.md`)
/// defines.
pub fn headers() -> Vec<&'static str> {
    COLUMNS.iter().map(|c| c.header).collect()
}

/// `ok`, `ok ×3` (repeats that finished), `mock ×3` for an invented cell,
/// `FAILED`, or `not available`.
///
/// Formula: FAILED if the cell failed; not available if the build or machine lacks what it
/// needs (not trained); else ok (mock if invented), with ×N when N > 1 repeats finished.
fn status(r: &CellSummary) -> String {
    let ok = if r.mock { "mock" } else { "ok" };
    match r.status {
        CellStatus::Ok if r.repeats > 1 => format!("{ok} ×{}", r.repeats),
        CellStatus::Ok => ok.into(),
        CellStatus::Failed => "FAILED".into(),
        CellStatus::Unavailable => "not available".into(),
    }
}

/// The input verdict's label: `loader only` for a cell that trained
/// nothing, else how input-bound the median data wait says it is.
pub fn input_bound(summary: &CellSummary) -> &'static str {
    match (summary.mode, summary.input_bound) {
        (Some(Mode::LoaderOnly), _) => "loader only",
        (_, Some(b @ (InputBound::No | InputBound::Moderately | InputBound::Highly))) => b.label(),
        _ => "-",
    }
}

/// Whether cell summary `s` finished with a measured speed.
pub fn finished(s: &CellSummary) -> bool {
    s.status == CellStatus::Ok && s.images_per_s.is_some()
}

/// The cell relative speeds compare with: `named` (a run's `--reference`)
/// where it finished, else the first finished cell of `rows`.
pub fn reference<'a>(rows: &[&'a CellSummary], named: Option<&str>) -> Option<&'a CellSummary> {
    named
        .and_then(|name| rows.iter().find(|r| r.cell == name && finished(r)))
        .or_else(|| rows.iter().find(|r| finished(r)))
        .copied()
}

/// Each workload `rows` train, in the order it first appears, with the
/// cell `rel` compares its cells with: `reference` (the run's) for the
/// workload it trains, else the workload's first finished cell; none where
/// no cell of it finished. One pass over the rows.
pub fn workload_references<'a>(
    rows: &[&'a CellSummary],
    reference: Option<&'a CellSummary>,
) -> Vec<(Option<&'a str>, Option<&'a CellSummary>)> {
    let mut at: std::collections::BTreeMap<Option<&str>, usize> = Default::default();
    let mut out: Vec<(Option<&str>, Option<&CellSummary>)> = Vec::new();
    for row in rows {
        let workload = row.workload.as_deref();
        let slot = *at.entry(workload).or_insert_with(|| {
            out.push((workload, None));
            out.len() - 1
        });
        if out[slot].1.is_none() && finished(row) {
            out[slot].1 = Some(*row);
        }
    }
    if let Some(r) = reference.filter(|r| finished(r)) {
        if let Some(&slot) = at.get(&r.workload.as_deref()) {
            out[slot].1 = Some(r);
        }
    }
    out
}

/// The note under a table that says what `rel` is against: the reference
/// of each workload `rows` train, and whether the `named` one was passed
/// over (not found, failed, or not a workload's). None for a lone row.
pub fn rel_note(rows: &[&CellSummary], named: Option<&str>) -> Option<String> {
    if rows.len() < 2 {
        return None;
    }
    let reference = reference(rows, named);
    let workloads = workload_references(rows, reference);
    let against: Vec<String> = workloads
        .iter()
        .filter_map(|(w, r)| {
            let r = (*r)?;
            Some(match (w, workloads.len()) {
                (Some(w), 2..) => format!("{} for {w}", r.shown()),
                _ => r.shown().to_string(),
            })
        })
        .collect();
    let chosen = named.is_some_and(|n| reference.is_some_and(|r| r.cell == n));
    if against.is_empty() || (chosen && workloads.len() == 1) {
        return None;
    }
    let mut note = format!("rel: images/s against {}", against.join("; "));
    if let Some(name) = named.filter(|n| reference.is_none_or(|r| r.cell != *n)) {
        note = format!("reference cell {name} not found or failed; {note}");
    }
    Some(note)
}

/// The cells table of `rows`, in their order, each row's `rel` against its
/// workload's reference ([`workload_references`]): speeds are never
/// compared across models or datasets.
///
/// Formula: rel = median images/s ÷ the median images/s of its workload's reference cell.
pub fn cells(rows: &[&CellSummary], reference: Option<&CellSummary>) -> CellsTable {
    let bases = workload_references(rows, reference)
        .into_iter()
        .filter_map(|(w, r)| Some((w.map(str::to_string), r?.images_per_s?.median)))
        .collect();
    let context =
        Context { bases, machines: machine::distinct_kinds(rows.iter().map(|r| r.machine.as_ref())) };
    let shown: Vec<&Column> = COLUMNS.iter().filter(|c| (c.shown)(rows, &context)).collect();
    let mut table = vec![shown.iter().map(|c| c.header.to_string()).collect::<Vec<_>>()];
    table.extend(rows.iter().map(|r| shown.iter().map(|c| (c.value)(r, &context)).collect()));
    CellsTable { rows: table, text: shown.iter().map(|c| c.text).collect(), machines: context.machines }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(median: f64) -> Option<Spread> {
        Spread::of(&[median])
    }

    fn summary(cell: &str, images_per_s: f64) -> CellSummary {
        let mut s = crate::tables::bare_summary(cell);
        s.backend = Some("ndarray".into());
        s.images_per_s = spread(images_per_s);
        s
    }

    #[test]
    fn columns_without_a_figure_are_left_out_and_rel_is_against_the_reference() {
        let a = summary("a", 100.0);
        let mut b = summary("b", 150.0);
        b.peak_rss_mib = spread(812.4);
        let rows = [&a, &b];
        let table = cells(&rows, reference(&rows, Some("b")));
        let header = &table.rows[0];
        assert!(header.contains(&"peak mem MiB".to_string()));
        assert!(!header.iter().any(|h| h.contains("gpu") || h == "replicas" || h == "machine"));
        let rel = header.iter().position(|h| h == "rel").expect("rel column");
        assert_eq!(table.rows[1][rel], "0.67×");
        assert_eq!(table.rows[2][rel], "1.00×");
        let mem = header.iter().position(|h| h == "peak mem MiB").expect("memory column");
        assert_eq!((table.rows[1][mem].as_str(), table.rows[2][mem].as_str()), ("-", "812"));
        assert_eq!(table.text.len(), header.len());
        assert!(table.text[0] && !table.text[rel]);
    }

    /// Two workloads: each row's rel is against its own workload's
    /// reference, the run's where it trains that workload.
    #[test]
    fn rel_compares_cells_of_one_workload_only() {
        let in_workload = |cell: &str, speed: f64, workload: &str| {
            let mut s = summary(cell, speed);
            s.workload = Some(workload.into());
            s
        };
        let small_flex = in_workload("a", 400.0, "resnet-18");
        let small_tch = in_workload("b", 100.0, "resnet-18");
        let big_flex = in_workload("c", 10.0, "resnet-50");
        let big_tch = in_workload("d", 20.0, "resnet-50");
        let rows = [&small_flex, &small_tch, &big_flex, &big_tch];
        let rel = |table: &CellsTable| {
            let at = table.rows[0].iter().position(|h| h == "rel").expect("rel column");
            table.rows[1..].iter().map(|r| r[at].clone()).collect::<Vec<_>>()
        };
        // The run's reference (b) trains resnet-18; resnet-50's is its first finished cell.
        assert_eq!(rel(&cells(&rows, reference(&rows, Some("b")))), ["4.00×", "1.00×", "1.00×", "2.00×"]);
        let references: Vec<(Option<&str>, Option<&str>)> = workload_references(&rows, Some(&small_tch))
            .into_iter()
            .map(|(w, r)| (w, r.map(|r| r.cell.as_str())))
            .collect();
        assert_eq!(references, [(Some("resnet-18"), Some("b")), (Some("resnet-50"), Some("c"))]);
        // Runs before workloads: one workload, as before.
        let (x, y) = (summary("x", 50.0), summary("y", 100.0));
        assert_eq!(rel(&cells(&[&x, &y], reference(&[&x, &y], None))), ["1.00×", "2.00×"]);
    }

    #[test]
    fn a_failed_reference_falls_back_to_the_first_finished_cell() {
        let mut a = summary("a", 100.0);
        a.status = CellStatus::Failed;
        let b = summary("b", 50.0);
        let rows = [&a, &b];
        assert_eq!(reference(&rows, Some("a")).map(|r| r.cell.as_str()), Some("b"));
        let table = cells(&rows, reference(&rows, Some("a")));
        assert_eq!(table.rows[1].last().map(String::as_str), Some("FAILED"));
    }
}
