//! Results directories read back: the one reader `--resume`, `report`,
//! `compare`, `merge` and `predict` go through. A results directory may
//! have been written on another machine, edited, cut short by a full disk
//! or a kill, so it is read as input ([`crate::bounds`]): regular files
//! only, each under its stated bound; every cell's file name in `run.json`
//! one that benchkit gives, once; a slice's position inside its count; an
//! event log's cut-off last line left out. Nothing here writes.

use super::layout::{CELLS, EVENTS, RUN};
use super::{CellRecord, StoredRun};
use crate::bounds::{self, BoundError};
use crate::report::{Stamped, SCHEMA_VERSION};
use crate::runner::RunnerError;
use benchkit_schema::{v1, version::is_v1};
use std::collections::BTreeSet;
use std::path::Path;

/// Whether `slug` is a file name benchkit gives a cell (`NNN-` and the id's
/// [`crate::config::slug`]): letters, digits and `._=,+-` only, not hidden,
/// short enough to be a file name with its `.json`.
fn benchkit_slug(slug: &str) -> bool {
    !slug.is_empty()
        && !slug.starts_with('.')
        && slug.len() + ".json".len() <= bounds::NAME_BYTES
        && slug.chars().all(|c| c.is_ascii_alphanumeric() || "._=,+-".contains(c))
}

/// `run`, read from `path`, if its cells and slice are ones benchkit writes:
/// every cell's file name benchkit's and unique, every id unique, every
/// plan's memory- and thread-sizing values within a config's ranges, a
/// slice `index` below a `count` of at least 1.
fn checked(run: StoredRun, path: &Path) -> Result<StoredRun, RunnerError> {
    let altered = |what: String| {
        RunnerError::Setup(format!(
            "{}: {what}; the file was altered or damaged, and is not read",
            path.display()
        ))
    };
    let (mut slugs, mut ids) = (BTreeSet::new(), BTreeSet::new());
    for cell in &run.cells {
        if !benchkit_slug(&cell.slug) || !slugs.insert(cell.slug.as_str()) {
            return Err(altered(format!(
                "cell {:?} has the file name {:?}, which benchkit would not give (letters, digits and ._=,+- only, \
                 one cell each)",
                cell.id, cell.slug
            )));
        }
        if !ids.insert(cell.id.as_str()) {
            return Err(altered(format!("cell {:?} is listed twice", cell.id)));
        }
    }
    // Values that size memory and threads, as a config's are bounded.
    for (what, plan) in std::iter::once(("the base plan".to_string(), &run.base))
        .chain(run.cells.iter().map(|c| (format!("cell {:?}", c.id), &c.plan)))
    {
        crate::config::within_ranges(plan).map_err(|why| altered(format!("{what} has {why}")))?;
    }
    if let Some(slice) = &run.slice {
        if slice.count == 0 || slice.index >= slice.count {
            return Err(altered(format!(
                "the slice is {} of {}; accepted is an index from 0 below a count of at least 1",
                slice.index, slice.count
            )));
        }
    }
    Ok(run)
}

/// `run.json` of results directory `dir`, if it is of this schema and
/// whole ([`checked`]).
pub fn read_run(dir: &Path) -> Result<StoredRun, RunnerError> {
    let path = dir.join(RUN);
    let text = bounds::read_text(&path, "a run record", bounds::RUN_RECORD_BYTES).map_err(|e| match e {
        BoundError::Io { source, .. } => RunnerError::Setup(format!(
            "{} is not a benchkit results directory: cannot read {}: {source}",
            dir.display(),
            path.display()
        )),
        other => other.into(),
    })?;
    let mut value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| RunnerError::Setup(format!("{}: not a run record: {e}", path.display())))?;
    let found = value.get("schema").and_then(serde_json::Value::as_str).unwrap_or("0.1.0");
    benchkit_schema::check_version(found).map_err(|e| {
        RunnerError::Setup(format!(
            "{}: {e}; re-run it with this benchkit, or read it with the benchkit that wrote it",
            dir.display()
        ))
    })?;
    if is_v1(found) {
        v1::upgrade(v1::Document::Run, &mut value);
    }
    let run = serde_json::from_value(value).map_err(|e| {
        RunnerError::Setup(format!("{}: not a run record of schema {SCHEMA_VERSION}: {e}", path.display()))
    })?;
    checked(run, &path)
}

/// Every event in `dir`'s `events.jsonl`, checked against this schema; a
/// last line cut off mid-write (no newline, not a whole object) is left out.
pub fn read_log(dir: &Path) -> Result<Vec<Stamped>, RunnerError> {
    let path = dir.join(EVENTS);
    let bytes = match bounds::read_file(&path, "an event log", bounds::EVENT_LOG_BYTES) {
        Err(BoundError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Vec::new())
        }
        other => other?,
    };
    // A log cut off inside a character ends in part of one: that line is torn.
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) if e.utf8_error().error_len().is_none() => {
            let whole = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(whole);
            String::from_utf8(bytes).unwrap_or_default()
        }
        Err(e) => {
            return Err(RunnerError::Setup(format!(
                "{}: not UTF-8 at byte {}; the log is damaged",
                path.display(),
                e.utf8_error().valid_up_to()
            )))
        }
    };
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    benchkit_schema::read_events(&text).map_err(|e| RunnerError::Setup(format!("{}: {e}", path.display())))
}

/// The record in cell file `path`, if there is one; `v1`: written under
/// results schema 1.x, and read in 2.0 names.
pub(crate) fn read_cell(path: &Path, v1: bool) -> Result<Option<CellRecord>, RunnerError> {
    let text = match bounds::read_text(path, "a cell record", bounds::CELL_RECORD_BYTES) {
        Err(BoundError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(e) => return Err(e.into()),
        Ok(text) => text,
    };
    let not_a_record =
        |e: serde_json::Error| RunnerError::Setup(format!("{}: not a cell record: {e}", path.display()));
    let mut value: serde_json::Value = serde_json::from_str(&text).map_err(not_a_record)?;
    if v1 {
        v1::upgrade(v1::Document::CellRecord, &mut value);
    }
    serde_json::from_value(value).map(Some).map_err(not_a_record)
}

/// Every cell record in results directory `dir`, in cell order.
pub fn load_cells(dir: &Path) -> Result<Vec<CellRecord>, RunnerError> {
    load_run_cells(dir).map(|(_, cells)| cells)
}

/// The cells of the runs in `baseline` and `new`, for `compare`; refused
/// when one is a `--mock` run (invented figures) and the other measured.
pub fn load_pair(baseline: &Path, new: &Path) -> Result<(Vec<CellRecord>, Vec<CellRecord>), RunnerError> {
    let (base_mock, base) = load_run_cells(baseline)?;
    let (new_mock, new_cells) = load_run_cells(new)?;
    if base_mock != new_mock {
        let (mock, measured) = if base_mock { (baseline, new) } else { (new, baseline) };
        return Err(RunnerError::Setup(format!(
            "{} is a --mock run, whose figures are invented; it cannot be compared with the measured run in {}",
            mock.display(),
            measured.display()
        )));
    }
    Ok((base, new_cells))
}

/// Whether the run in `dir` is a `--mock` run, and its cells: the records
/// of the cells `run.json` lists, by the file names it gives them (a file
/// in `cells/` that no cell names is not read).
pub fn load_run_cells(dir: &Path) -> Result<(bool, Vec<CellRecord>), RunnerError> {
    let run = read_run(dir)?;
    let cells = dir.join(CELLS);
    if !cells.is_dir() {
        return Err(RunnerError::Setup(format!(
            "{} is not a benchkit results directory: it has no directory {CELLS}/",
            dir.display()
        )));
    }
    let v1 = run.schema.as_deref().is_some_and(is_v1);
    let mut records = Vec::new();
    for cell in &run.cells {
        let path = cells.join(format!("{}.json", cell.slug));
        if let Some(record) = read_cell(&path, v1)? {
            if record.cell != cell.id {
                return Err(RunnerError::Setup(format!(
                    "{}: holds cell {:?}, but run.json gives this file to cell {:?}; the directory was altered",
                    path.display(),
                    record.cell,
                    cell.id
                )));
            }
            records.push(record);
        }
    }
    records.sort_by_key(|r| r.index);
    let mock = run.mock || records.iter().flat_map(|r| &r.repeats).any(|r| r.mock);
    Ok((mock, records))
}
