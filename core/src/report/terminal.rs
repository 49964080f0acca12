//! The built-in results table printed on stdout: one row per cell, sorted by
//! the swept axes, with speed relative to a reference cell.

use super::{CellStatus, CellSummary, InputBound, Report};
use crate::config::{Axis, Mode};
use crate::measure::Spread;
use benchkit_schema::{machine, Bottleneck};
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

fn median(s: &Option<Spread>, unit: &str, scale: f64, digits: usize) -> String {
    s.map_or("-".into(), |s| format!("{:.digits$}{unit}", s.median * scale))
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
        let ok = |r: &&&CellSummary| r.status == CellStatus::Ok && r.images_per_s.is_some();
        let named = self.reference.as_ref().and_then(|name| rows.iter().find(|r| &r.cell == name));
        let reference = named.filter(ok).or_else(|| rows.iter().find(ok));
        let base = reference.and_then(|r| r.images_per_s).map(|s| s.median);
        let columns = Columns {
            repeats: rows.iter().any(|r| r.repeats > 1),
            parallel: rows.iter().any(|r| r.replicas.is_some()),
            gpu: rows.iter().any(|r| r.gpu_util_pct.is_some()),
            memory: rows.iter().any(|r| r.peak_rss_mib.is_some()),
            gpu_memory: rows.iter().any(|r| r.gpu_memory_mib.is_some()),
            energy: rows.iter().any(|r| r.joules_per_image.is_some()),
            target: rows.iter().any(|r| r.target_accuracy.is_some()),
            cost: rows.iter().any(|r| r.usd_per_epoch.is_some()),
            threads: engines_compared(&rows),
            machines: machine::distinct_kinds(rows.iter().map(|r| r.machine.as_ref())),
        };
        let header = columns.header();
        let mut table: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
        let mut notes = Vec::new();
        for r in &rows {
            table.push(columns.row(r, base));
            notes.extend(cell_notes(r));
        }
        if rows.iter().any(|r| r.weak_scaling.is_some() || r.strong_scaling.is_some()) {
            notes.push(
                "weak / strong: scaling efficiency, images/s over replicas × a 1-replica cell's with the same \
                 per-replica (weak) or global (strong) batch; exposed comm.: share of step time waiting for the \
                 all-reduce after the backward pass"
                    .into(),
            );
        }
        if let (Some(name), Some(r)) = (&self.reference, reference) {
            if &r.cell != name {
                notes.push(format!("reference cell {name} not found or failed; rel is against {}", r.cell));
            }
        } else if let Some(r) = reference.filter(|_| rows.len() > 1) {
            notes.push(format!("rel: images/s against {}", r.cell));
        }

        notes.extend(machine::legend(&columns.machines, rows.iter().filter_map(|r| r.machine.as_ref())));
        let last = header.len() - 1;
        let text = if columns.machines.is_empty() { 2 } else { 3 };
        let mut out = String::new();
        if self.mock {
            let _ = writeln!(out, "{}", benchkit_schema::MOCK_NOTE);
        }
        out.push_str(&super::table::render(&table, |c| c < text || c == last));
        for n in notes {
            let _ = writeln!(out, "{n}");
        }
        out.push_str(&seed_table(&rows));
        out.push_str(&phase_table(&rows));
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

/// Whether the cells ran on more than one backend: then each one's CPU
/// threads are shown, since engines can size their pools differently.
fn engines_compared(rows: &[&CellSummary]) -> bool {
    let mut backends = rows.iter().filter_map(|r| r.backend.as_deref());
    let first = backends.next();
    backends.any(|b| Some(b) != first)
}

/// The optional columns, each shown when any cell has its figure.
struct Columns {
    repeats: bool,
    parallel: bool,
    gpu: bool,
    memory: bool,
    gpu_memory: bool,
    energy: bool,
    target: bool,
    cost: bool,
    /// Each cell's CPU threads, where engines are compared.
    threads: bool,
    /// The kinds of machine the cells ran on, where there are several.
    machines: Vec<String>,
}

impl Columns {
    fn header(&self) -> Vec<&'static str> {
        let mut header = vec!["cell", "model"];
        if !self.machines.is_empty() {
            header.push("machine");
        }
        header.push("img/s");
        if self.repeats {
            header.push("±");
        }
        header.push("rel");
        if self.threads {
            header.push("threads");
        }
        if self.parallel {
            header.extend(["replicas", "weak", "strong", "exposed comm."]);
        }
        header.extend(["step p50", "step p90", "data wait", "input", "bottleneck"]);
        if self.gpu {
            header.push("gpu util (min)");
        }
        if self.memory {
            header.push("peak mem");
        }
        if self.gpu_memory {
            header.push("gpu mem");
        }
        if self.energy {
            header.push("J/img");
        }
        header.push("test acc");
        if self.target {
            header.push("to target");
        }
        if self.cost {
            header.push("$/epoch");
        }
        header.push("status");
        header
    }

    /// One cell's row; `rel` against the reference's median images/s `base`.
    fn row(&self, r: &CellSummary, base: Option<f64>) -> Vec<String> {
        let mut row = vec![r.cell.clone(), r.model.clone().unwrap_or_else(|| "-".into())];
        if !self.machines.is_empty() {
            row.push(machine::tag(&self.machines, r.machine.as_ref()));
        }
        row.push(median(&r.images_per_s, "", 1.0, 1));
        if self.repeats {
            row.push(
                r.images_per_s.filter(|s| s.n > 1).map_or("".into(), |s| format!("{:.1} %", s.variation_pct)),
            );
        }
        row.push(match (r.images_per_s, base) {
            (Some(s), Some(b)) if b > 0.0 => format!("{:.2}×", s.median / b),
            _ => "-".into(),
        });
        if self.threads {
            row.push(r.threads.map_or("-".into(), |t| t.to_string()));
        }
        if self.parallel {
            row.push(r.replicas.map_or("1".into(), |w| w.to_string()));
            for scaling in [&r.weak_scaling, &r.strong_scaling] {
                row.push(
                    scaling.as_ref().map_or("-".into(), |x| format!("{:.0} %", 100.0 * x.efficiency.median)),
                );
            }
            row.push(median(&r.exposed_communication_pct, " %", 1.0, 1));
        }
        row.push(median(&r.step_p50_ms, " ms", 1.0, 1));
        row.push(median(&r.step_p90_ms, " ms", 1.0, 1));
        row.push(median(&r.data_wait_pct, " %", 1.0, 1));
        row.push(match (r.mode, r.input_bound) {
            (Some(Mode::LoaderOnly), _) => "loader only".into(),
            (_, Some(verdict)) => verdict.label().into(),
            _ => "-".into(),
        });
        row.push(r.verdict.as_ref().map_or("-".into(), |v| v.bottleneck.label().into()));
        if self.gpu {
            row.push(match (r.gpu_util_pct, r.gpu_util_min_pct) {
                (Some(mean), Some(min)) => format!("{:.0} % ({:.0} %)", mean.median, min.median),
                _ => "-".into(),
            });
        }
        if self.memory {
            row.push(r.peak_rss_mib.map_or("-".into(), |m| format!("{:.0} MiB", m.median)));
        }
        if self.gpu_memory {
            row.push(r.gpu_memory_mib.map_or("-".into(), |m| format!("{:.0} MiB", m.median)));
        }
        if self.energy {
            row.push(r.joules_per_image.map_or("-".into(), |j| format!("{:.3}", j.median)));
        }
        row.push(median(&r.final_test_accuracy, " %", 100.0, 2));
        if self.target {
            row.push(match (&r.time_to_target_s, r.target_accuracy) {
                (Some(t), _) => format!("{:.1} s ({}/{})", t.median, r.target_reached, r.repeats),
                (None, Some(_)) if r.repeats > 0 => "not reached".into(),
                _ => "-".into(),
            });
        }
        if self.cost {
            row.push(r.usd_per_epoch.map_or("-".into(), |s| format!("${:.4}", s.median)));
        }
        let ok = if r.mock { "mock" } else { "ok" };
        row.push(match r.status {
            CellStatus::Ok if r.repeats > 1 => format!("{ok} ×{}", r.repeats),
            CellStatus::Ok => ok.into(),
            CellStatus::Failed => "FAILED".into(),
        });
        row
    }
}

/// The notes under the table about one cell: why it failed, outliers, what
/// its accuracy measures, warnings, and its loader where that matters.
fn cell_notes(r: &CellSummary) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(reason) = &r.reason {
        notes.push(format!("{}: failed: {reason}", r.cell));
    }
    if !r.outliers.is_empty() {
        let list: Vec<String> = r.outliers.iter().map(|k| format!("#{k}")).collect();
        notes.push(format!("{}: outlier repeat(s) {} (modified z-score > 3.5)", r.cell, list.join(", ")));
    }
    if let Some(metric) = r.accuracy_metric.as_deref().filter(|m| *m != "top-1") {
        if r.mode != Some(Mode::LoaderOnly) {
            notes.push(format!("{}: test acc is the {metric}", r.cell));
        }
    }
    for (kind, scaling) in [("weak", &r.weak_scaling), ("strong", &r.strong_scaling)] {
        if let Some(x) = scaling {
            notes.push(format!(
                "{}: {kind} scaling against {} ({:.1} img/s at batch {})",
                r.cell, x.baseline_cell, x.baseline_images_per_s, x.baseline_batch
            ));
        }
    }
    if let Some(c) = &r.communication {
        notes.push(format!("{}: all-reduce: {}", r.cell, c.line()));
    }
    notes.extend(r.warnings.iter().map(|w| format!("{}: warning: {w}", r.cell)));
    if let Some(short) = &r.short_batches {
        notes.push(format!("{}: {}", r.cell, short.line()));
    }
    if r.retried > 0 {
        notes.push(format!(
            "{}: {} attempt(s) failed for a transient cause and were run again",
            r.cell, r.retried
        ));
    }
    if let Some(search) = &r.batch_search {
        notes.push(format!("{}: batch_size = \"max\" found {}", r.cell, search.line()));
    }
    if let Some(v) = r.verdict.as_ref().filter(|v| v.bottleneck != Bottleneck::Compute) {
        notes.push(format!("{}: {} bound: {}; try {}", r.cell, v.bottleneck.label(), v.evidence, v.advice));
    }
    if let Some(l) = &r.loader {
        let bound = matches!(r.input_bound, Some(InputBound::Moderately | InputBound::Highly));
        if bound || r.mode == Some(Mode::LoaderOnly) {
            let threads = if l.workers == 0 {
                "the step thread".to_string()
            } else {
                format!("{} worker(s)", l.workers)
            };
            notes.push(format!(
                "{}: {} pipeline on {threads}; per batch: read {:.1} ms, decode {:.1} ms, transform {:.1} ms",
                r.cell, l.pipeline, l.read_ms, l.decode_ms, l.transform_ms
            ));
        }
        if l.skipped > 0 {
            // Results before schema 1.4.0 counted a sample once a pass, with no split.
            let split = if l.skipped_train + l.skipped_test == l.skipped {
                format!(" ({} training, {} test), each once", l.skipped_train, l.skipped_test)
            } else {
                String::new()
            };
            notes.push(format!(
                "{}: skipped {} corrupt sample(s){split}, e.g. {}",
                r.cell,
                l.skipped,
                l.skipped_examples.first().map_or("-", String::as_str)
            ));
        }
        if let Some(first) = l.cut_files.first() {
            let unread: u64 = l.cut_files.iter().map(|c| c.unread_bytes).sum();
            notes.push(format!(
                "{}: read {} file(s) only up to a fault; {unread} byte(s) after the faults unread, so their samples are in no count; e.g. {} ({} bytes unread)",
                r.cell,
                l.cut_files.len(),
                first.at,
                first.unread_bytes
            ));
        }
    }
    notes
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
        let mut run = crate::analysis::sample_result(backend, 1, 16, 16, 0.1);
        (run.backend, run.threads) = (backend.into(), threads);
        CellSummary::of(index, backend, &Default::default(), &[run], None)
    }

    /// Engines compared: each row's threads, `-` where a GPU computes; one
    /// engine alone: no column.
    #[test]
    fn threads_show_where_engines_are_compared() {
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
