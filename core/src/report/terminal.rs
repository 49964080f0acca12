//! The built-in results table printed on stdout: one row per cell, sorted by
//! the swept axes, with speed relative to a reference cell.

use super::{CellSummary, Report};
use crate::config::Axis;
use benchkit_schema::{machine, tables};
use std::fmt::Write;

/// Collects cell summaries and renders them as an aligned table.
#[derive(Default)]
pub struct Terminal {
    axes: Vec<Axis>,
    reference: Option<String>,
    rows: Vec<CellSummary>,
    /// A `--mock` run: said above the table.
    mock: bool,
}

impl Terminal {
    /// A table sorted by `axes`, relative speeds against cell `reference`
    /// (the first finished row when `None`).
    pub fn new(axes: Vec<Axis>, reference: Option<String>) -> Self {
        Self { axes, reference, rows: Vec::new(), mock: false }
    }

    /// Mark the table as a `--mock` run's.
    pub fn mock(&mut self) {
        self.mock = true;
    }

    /// Set the rows' scaling, computed once every cell is in.
    pub fn scaling(&mut self, scaling: &[benchkit_schema::CellScaling]) {
        benchkit_schema::scaling::apply(&mut self.rows, scaling);
    }

    fn sorted(&self) -> Vec<&CellSummary> {
        let mut rows: Vec<&CellSummary> = self.rows.iter().collect();
        rows.sort_by_key(|r| {
            let mut key: Vec<usize> = self
                .axes
                .iter()
                .map(|a| {
                    r.axes
                        .get(&a.key)
                        .and_then(|v| a.values.iter().position(|x| x == v))
                        .unwrap_or(a.values.len())
                })
                .collect();
            key.push(r.index);
            key
        });
        rows
    }

    /// The table of every cell seen so far, and notes under it.
    pub fn render(&self) -> String {
        let rows = self.sorted();
        let reference = tables::reference(&rows, self.reference.as_deref());
        let table = tables::cells(&rows, reference);
        let labels: std::collections::BTreeMap<&str, &str> =
            rows.iter().map(|r| (r.cell.as_str(), r.shown())).collect();
        let mut notes: Vec<String> = rows
            .iter()
            .flat_map(|r| tables::notes(r, &labels))
            .map(|n| format!("{}: {}", n.cell, n.text))
            .collect();
        if rows.iter().any(|r| r.weak_scaling.is_some() || r.strong_scaling.is_some()) {
            notes.push(
                "weak / strong %: scaling efficiency, images/s over replicas × a 1-replica cell's with the same \
                 per-replica (weak) or global (strong) batch; exposed comm. %: share of step time waiting for the \
                 all-reduce after the backward pass"
                    .into(),
            );
        }
        notes.extend(tables::rel_note(&rows, self.reference.as_deref()));
        notes.extend(machine::legend(&table.machines, rows.iter().filter_map(|r| r.machine.as_ref())));
        notes.push(tables::FIGURES_NOTE.into());
        let mut out = String::new();
        if self.mock {
            let _ = writeln!(out, "{}", benchkit_schema::MOCK_NOTE);
        }
        out.push_str(&super::table::render(&table.rows, |c| table.text.get(c).copied().unwrap_or(true)));
        for n in notes {
            let _ = writeln!(out, "{n}");
        }
        out.push_str(&seed_table(&rows));
        out.push_str(&phase_table(&rows));
        out.push_str(&op_tables(&rows));
        out.push_str(&pipeline_table(&rows));
        out
    }
}

/// The cells trained with several seeds ([`benchkit_schema::tables::seeds`]).
fn seed_table(rows: &[&CellSummary]) -> String {
    let Some(table) = benchkit_schema::tables::seeds(rows) else { return String::new() };
    let mut out = String::from(
        "\nacross seeds (each seed's median over its repeats; between repeats: MAD within a seed)\n",
    );
    out.push_str(&super::table::render(&table, |c| c == 0));
    out
}

/// The profiled cells' step phases ([`benchkit_schema::tables::phases`]).
fn phase_table(rows: &[&CellSummary]) -> String {
    let Some(table) = benchkit_schema::tables::phases(rows) else { return String::new() };
    let mut out =
        String::from("\nstep phases (mean per profiled step; the device synchronised at each edge)\n");
    out.push_str(&super::table::render(&table, |c| c == 0));
    out.push_str("profiling cost: profiled step against the plain steps interleaved with it\n");
    out
}

/// Where the op-profiled cells' steps go, and where backends differ
/// ([`benchkit_schema::tables::op_tables`]).
fn op_tables(rows: &[&CellSummary]) -> String {
    let mut out = String::new();
    for t in benchkit_schema::tables::op_tables(rows, None, 12) {
        let _ = writeln!(
            out,
            "\nops, {} (mean per op-profiled step; the device synchronised after every op)",
            t.title
        );
        for line in &t.coverage {
            let _ = writeln!(out, "  {line}");
        }
        if !t.categories.is_empty() {
            out.push_str(&super::table::render(&t.categories, |c| c == 0));
        }
        for (title, table) in &t.ops {
            let _ = writeln!(out, "top ops, {title}");
            out.push_str(&super::table::render(table, |c| c <= 1));
        }
    }
    out
}

/// The pipeline cells' stages: the bubble against GPipe's, each stage's
/// time and cost share, and their activation memory.
fn pipeline_table(rows: &[&CellSummary]) -> String {
    let cells: Vec<(&str, &benchkit_schema::PipelineReport)> =
        rows.iter().filter_map(|r| Some((r.cell.as_str(), r.pipeline.as_ref()?))).collect();
    let Some(table) = benchkit_schema::pipeline::table(&cells) else { return String::new() };
    let mut out = String::from(
        "
pipeline stages (mean per measured step)
",
    );
    out.push_str(&super::table::render(&table, |c| c == 0));
    let _ = writeln!(out, "{}", benchkit_schema::PIPELINE_NOTE);
    out
}

impl Report for Terminal {
    fn summary(&mut self, summary: &CellSummary) {
        self.rows.push(summary.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished cell of `backend`, computing on `threads` threads.
    fn row(index: usize, backend: &str, threads: Option<usize>) -> CellSummary {
        let mut repeat = crate::analysis::sample_result(backend, 1, 16, 16, 0.1);
        (repeat.backend, repeat.threads) = (backend.into(), threads);
        CellSummary::of(index, backend, &Default::default(), &[repeat], None)
    }

    /// Backends compared: each row's threads, `-` where a GPU computes; one
    /// backend alone: no column.
    #[test]
    fn threads_show_where_backends_are_compared() {
        let mut table = Terminal::new(Vec::new(), None);
        for (i, (backend, threads)) in
            [("tch", Some(2)), ("pytorch", Some(1)), ("tch-cuda", None)].into_iter().enumerate()
        {
            table.summary(&row(i, backend, threads));
        }
        let text = table.render();
        let lines: Vec<&str> = text.lines().collect();
        let at = lines[0].find("threads").unwrap_or_else(|| panic!("{text}"));
        let column = |line: &str| line[at..].split_whitespace().next().unwrap_or_default().to_string();
        let cells: Vec<String> = lines[2..5].iter().map(|l| column(l)).collect();
        assert_eq!(cells, ["2", "1", "-"], "{text}");
        let mut alone = Terminal::new(Vec::new(), None);
        alone.summary(&row(0, "flex", Some(2)));
        alone.summary(&row(1, "flex", Some(2)));
        assert!(!alone.render().contains("threads"));
    }
}
