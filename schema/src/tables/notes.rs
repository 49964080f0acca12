//! The notes under the cells table, defined once: why a cell failed, its
//! outliers, warnings, scaling baselines, bottleneck and loader.

use crate::{Bottleneck, CellSummary, InputBound, Mode};

/// A remark on one cell, for the notes under a table.
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    /// The cell as a person reads it: its label ([`CellSummary::shown`]).
    pub cell: String,
    /// Whether the cell failed (`text` then starts with "failed: ").
    pub failed: bool,
    pub text: String,
}

/// The notes under the table about one cell: why it failed, outliers, what
/// its accuracy measures, warnings, and its loader where that matters.
/// Another cell is named by its label in `labels` (by cell id), else its id.
pub fn notes(r: &CellSummary, labels: &std::collections::BTreeMap<&str, &str>) -> Vec<Note> {
    let mut notes = Vec::new();
    let mut say = |failed: bool, text: String| notes.push(Note { cell: r.shown().to_string(), failed, text });
    match (&r.reason, r.status) {
        (Some(reason), crate::CellStatus::Unavailable) => say(false, format!("not available: {reason}")),
        (Some(reason), _) => say(true, format!("failed: {reason}")),
        (None, _) => {}
    }
    if let Some(f) = &r.faults {
        say(false, format!("faults injected: {}", f.line()));
    }
    if !r.outliers.is_empty() {
        let list: Vec<String> = r.outliers.iter().map(|k| format!("#{k}")).collect();
        say(false, format!("outlier repeat(s) {} (modified z-score > 3.5)", list.join(", ")));
    }
    if let Some(metric) = r.accuracy_metric.as_deref().filter(|m| *m != "top-1") {
        if r.mode != Some(Mode::LoaderOnly) {
            say(false, format!("test acc is the {metric}"));
        }
    }
    for (kind, scaling) in [("weak", &r.weak_scaling), ("strong", &r.strong_scaling)] {
        if let Some(x) = scaling {
            say(
                false,
                format!(
                    "{kind} scaling against {} ({:.1} img/s at batch {})",
                    labels.get(x.baseline_cell.as_str()).copied().unwrap_or(&x.baseline_cell),
                    x.baseline_images_per_s,
                    x.baseline_batch
                ),
            );
        }
    }
    if let Some(c) = &r.communication {
        say(false, format!("all-reduce: {}", c.line()));
    }
    for w in &r.warnings {
        say(false, format!("warning: {w}"));
    }
    if let Some(short) = &r.short_batches {
        say(false, short.line());
    }
    if r.retried > 0 {
        say(false, format!("{} attempt(s) failed for a transient cause and were run again", r.retried));
    }
    if let Some(search) = &r.batch_search {
        say(false, format!("batch_size = \"max\" found {}", search.line()));
    }
    if let Some(v) = r.verdict.as_ref().filter(|v| v.bottleneck != Bottleneck::Compute) {
        say(false, format!("{} bound: {}; try {}", v.bottleneck.label(), v.evidence, v.advice));
    }
    if let Some(l) = &r.loader {
        let bound = matches!(r.input_bound, Some(InputBound::Moderately | InputBound::Highly));
        if bound || r.mode == Some(Mode::LoaderOnly) {
            let threads = if l.workers == 0 {
                "the step thread".to_string()
            } else {
                format!("{} worker(s)", l.workers)
            };
            say(
                false,
                format!(
                    "{} loader on {threads}; per batch: read {:.1} ms, decode {:.1} ms, transform {:.1} ms",
                    l.pipeline, l.read_ms, l.decode_ms, l.transform_ms
                ),
            );
        }
        if l.skipped > 0 {
            // Results before schema 1.4.0 counted a sample once a pass, with no split.
            let split = if l.skipped_train + l.skipped_test == l.skipped {
                format!(" ({} training, {} test), each once", l.skipped_train, l.skipped_test)
            } else {
                String::new()
            };
            say(
                false,
                format!(
                    "skipped {} corrupt sample(s){split}, e.g. {}",
                    l.skipped,
                    l.skipped_examples.first().map_or("-", String::as_str)
                ),
            );
        }
        if let Some(first) = l.cut_files.first() {
            let unread: u64 = l.cut_files.iter().map(|c| c.unread_bytes).sum();
            say(false, format!("read {} file(s) only up to a fault; {unread} byte(s) after the faults unread, so their samples are in no count; e.g. {} ({} bytes unread)", l.cut_files.len(),
                first.at,
                first.unread_bytes
            ));
        }
    }
    notes
}
