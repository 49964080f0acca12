//! The commands that run, merge and render runs: each prints its table, the
//! reporters' warnings and where the results went.

use super::{CliError, Exit};
use crate::config::PluginPlan;
use crate::plugin::PluginSource;
use crate::runner::{self, RunOptions, RunSource};
use std::path::{Path, PathBuf};

/// `benchkit run`: the table, warnings, and where the results went.
pub(super) fn run(
    source: &RunSource,
    options: &RunOptions,
    history: Option<&Path>,
) -> Result<Exit, CliError> {
    let summary = runner::run(source, options)?;
    print!("{}", summary.table);
    for e in &summary.reporter_errors {
        eprintln!("warning: {e}");
    }
    if let (Some(slice), true) = (&options.slice, summary.summaries.is_empty()) {
        eprintln!(
            "note: slice {} of {} owns no cell (the matrix has fewer cells than slices); merge accepts it",
            slice.index, slice.count
        );
    }
    println!("results in {}", summary.run_dir.display());
    for path in &summary.artifacts {
        println!("wrote {}", path.display());
    }
    if let Some(db) = history {
        super::history::add_finished(db, &summary.run_dir)?;
    }
    if summary.failed > 0 {
        return Err(CliError::CellsFailed {
            failed: summary.failed,
            cells: summary.summaries.len(),
            dir: summary.run_dir.display().to_string(),
        });
    }
    Ok(Exit::Success)
}

/// `benchkit merge`: the slices joined, the table, and what failed.
pub(super) fn merge(out: &Path, dirs: &[PathBuf], reference: Option<String>) -> Result<Exit, CliError> {
    let merged = runner::merge(out, dirs, reference)?;
    print!("{}", merged.rendered.table);
    for e in &merged.rendered.reporter_errors {
        eprintln!("warning: {e}");
    }
    for (cell, dir) in &merged.failed {
        eprintln!(
            "warning: cell {cell} failed in {}; run it again with `benchkit run --resume {}`, then merge again",
            dir.display(),
            dir.display()
        );
    }
    println!("merged {} slice(s), {} cell(s), into {}", merged.slices, merged.cells, merged.dir.display());
    for path in &merged.rendered.artifacts {
        println!("wrote {}", path.display());
    }
    if !merged.failed.is_empty() {
        return Err(CliError::CellsFailed {
            failed: merged.failed.len(),
            cells: merged.cells,
            dir: merged.dir.display().to_string(),
        });
    }
    Ok(Exit::Success)
}

/// `benchkit report`: a stored run rendered again.
pub(super) fn report(dir: &Path, reporters: &[String], reference: Option<String>) -> Result<Exit, CliError> {
    let here = std::env::current_dir().unwrap_or_default();
    let plans: Vec<PluginPlan> = reporters
        .iter()
        .map(|r| PluginPlan {
            source: PluginSource::parse(r, &here),
            config: serde_json::Value::Object(Default::default()),
            key: "--reporter".into(),
        })
        .collect();
    let chosen = (!plans.is_empty()).then_some(plans.as_slice());
    let out = runner::rerender(dir, chosen, reference)?;
    print!("{}", out.table);
    for e in &out.reporter_errors {
        eprintln!("warning: {e}");
    }
    if !out.unfinished.is_empty() {
        eprintln!(
            "warning: {} cell(s) have no result yet ({}); finish them with `benchkit run --resume {}`",
            out.unfinished.len(),
            out.unfinished.join(", "),
            dir.display()
        );
    }
    for path in &out.artifacts {
        println!("wrote {}", path.display());
    }
    Ok(Exit::Success)
}
