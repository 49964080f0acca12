//! `benchkit merge OUT DIR...`: the slices of one matrix (`benchkit run
//! --slice`) joined into one results directory, as if one run had run
//! every cell. Refused unless every directory is a slice of the same
//! config (its bytes' SHA-256), matrix and plugins, and every cell of the
//! matrix comes from exactly one of them: a missing cell names the slice
//! that owns it, a duplicated one the directories that hold it. Each cell
//! keeps the machine it ran on; scaling is computed again over all cells
//! (a baseline on the same kind of machine), and the reports are rebuilt
//! from the merged events as `benchkit report` rebuilds them.

use super::rerender::{rerender, Rerendered};
use crate::config::Cell;
use crate::report::{CellStatus, CellSummary, Event, PluginUse, RunEnd, RunStart, Stamped, SCHEMA_VERSION};
use crate::runner::store::events::cell_events;
use crate::runner::store::layout;
use crate::runner::store::read::{load_run_cells, read_log, read_run};
use crate::runner::store::{write_atomic, CellRecord, MergedSlice, RunRecord, SliceRecord, Store, StoredRun};
use crate::runner::RunnerError;
use benchkit_schema::{CellHeader, CellScaling, Machine};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One slice, read.
struct Slice {
    dir: PathBuf,
    run: StoredRun,
    record: SliceRecord,
    mock: bool,
    cells: Vec<CellRecord>,
    log: Vec<Stamped>,
    /// Its last session's `run-start`.
    start: Stamped,
    /// When its first session started.
    started: u64,
}

/// What merging produced.
pub struct Merged {
    pub dir: PathBuf,
    pub slices: usize,
    pub cells: usize,
    /// Cells that failed in their slice, with that slice's directory.
    pub failed: Vec<(String, PathBuf)>,
    /// The merged run rendered.
    pub rendered: Rerendered,
}

fn setup(message: String) -> RunnerError {
    RunnerError::Setup(message)
}

fn read_slice(dir: &Path) -> Result<Slice, RunnerError> {
    // Any schema this build reads: slices of 1.x are read in 2.0's names,
    // and the merged run is written in this build's.
    let run = read_run(dir)?;
    let record = run.slice.clone().ok_or_else(|| {
        setup(match run.merged_from.len() {
            0 => format!(
                "{} holds a whole run, not a slice of one (it was run without --slice); merge joins the slices of one matrix",
                dir.display()
            ),
            n => format!(
                "{} is already a merged run (of {n} slices); merge the slices themselves, listed in its run.json",
                dir.display()
            ),
        })
    })?;
    let (mock, cells) = load_run_cells(dir)?;
    let log = read_log(dir)?;
    let start =
        log.iter().rev().find(|e| matches!(e.event, Event::RunStart(_))).cloned().ok_or_else(|| {
            setup(format!(
                "{}: events.jsonl holds no run-start event; the slice never started",
                dir.display()
            ))
        })?;
    // A resumed slice started with its first session.
    let started =
        log.iter().find(|e| matches!(e.event, Event::RunStart(_))).map_or(start.time_ms, |e| e.time_ms);
    Ok(Slice { dir: dir.into(), run, record, mock, cells, log, start, started })
}

/// `out` is new, and none of the slices.
fn check_output(out: &Path, dirs: &[PathBuf]) -> Result<(), RunnerError> {
    let same = |d: &Path| match (out.canonicalize(), d.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if let Some(d) = dirs.iter().find(|d| same(d)) {
        return Err(setup(format!("{} is one of the slices; merge into a new directory", d.display())));
    }
    if out.join(layout::RUN).exists() {
        return Err(setup(format!(
            "{} already holds a run; remove it or merge into another directory",
            out.display()
        )));
    }
    Ok(())
}

fn start_of(slice: &Slice) -> &RunStart {
    match &slice.start.event {
        Event::RunStart(start) => start,
        _ => unreachable!("read_slice keeps a run-start event"),
    }
}

/// Every slice of the same config, matrix, plugins and kind of figures as
/// the first; the plugins they loaded.
fn check_alike(slices: &[Slice]) -> Result<Vec<PluginUse>, RunnerError> {
    let first = &slices[0];
    for other in &slices[1..] {
        let (a, b) = (&first.record, &other.record);
        let (da, db) = (first.dir.display(), other.dir.display());
        if a.config_sha256 != b.config_sha256 {
            return Err(setup(format!(
                "{db} ran another config than {da}: {} has SHA-256 {}, {} has {}; merge joins the slices of one config",
                other.run.config_file.display(),
                b.config_sha256,
                first.run.config_file.display(),
                a.config_sha256
            )));
        }
        if a.count != b.count {
            return Err(setup(format!(
                "{da} is a slice of {} and {db} of {}: the matrix was split two ways; run every slice with the same N",
                a.count, b.count
            )));
        }
        if a.matrix != b.matrix {
            return Err(setup(format!(
                "{da} and {db} ran the same config file but expanded it to other cells ({} and {} cells): \
                 the launcher's environment differed",
                a.matrix.len(),
                b.matrix.len()
            )));
        }
        if first.mock != other.mock {
            let (mock, measured) = if first.mock { (&da, &db) } else { (&db, &da) };
            return Err(setup(format!(
                "{mock} is a --mock run, whose figures are invented; it cannot be merged with the measured slice {measured}"
            )));
        }
    }
    plugins_of(slices)
}

/// Every plugin the slices loaded, once: each slice loads those of its own
/// cells, so they may differ in which, but one plugin (role and origin) must
/// be the same build (SHA-256) in every slice that loaded it.
fn plugins_of(slices: &[Slice]) -> Result<Vec<PluginUse>, RunnerError> {
    let mut all: Vec<(PluginUse, &Path)> = Vec::new();
    for slice in slices {
        for p in &start_of(slice).plugins {
            match all.iter().find(|(q, _)| q.role == p.role && q.origin == p.origin) {
                Some((q, dir)) if q.sha256 != p.sha256 => {
                    return Err(setup(format!(
                        "{} loaded {} plugin {} with SHA-256 {}, {} the same plugin with SHA-256 {}: the slices ran \
                         other builds of it; run every slice with the same plugins (and the same benchkit for the \
                         built-in ones)",
                        slice.dir.display(),
                        p.role,
                        p.origin,
                        p.sha256,
                        dir.display(),
                        q.sha256
                    )))
                }
                Some(_) => {}
                None => all.push((p.clone(), &slice.dir)),
            }
        }
    }
    Ok(all.into_iter().map(|(p, _)| p).collect())
}

/// For each cell of the matrix, the slice holding its record: every cell
/// from exactly one slice, and finished there (failed is finished).
fn owners(slices: &[Slice]) -> Result<Vec<(&Slice, &CellRecord)>, RunnerError> {
    let record = &slices[0].record;
    let mut problems = Vec::new();
    let mut owners = Vec::new();
    for (position, id) in record.matrix.iter().enumerate() {
        let holders: Vec<(&Slice, &CellRecord)> =
            slices.iter().filter_map(|s| Some((s, s.cells.iter().find(|c| &c.cell == id)?))).collect();
        let owner = position % record.count;
        match holders.as_slice() {
            [(slice, cell)] if cell.summary.is_none() => problems.push(format!(
                "cell {id} did not finish in {} (slice {owner} of {}); finish it with `benchkit run --resume {}`",
                slice.dir.display(),
                record.count,
                slice.dir.display()
            )),
            [one] => owners.push(*one),
            [] => {
                let given = slices.iter().find(|s| s.record.index == owner);
                problems.push(match given {
                    Some(s) => format!(
                        "cell {id} has no result in {} (slice {owner} of {}): the slice stopped before it; finish it \
                         with `benchkit run --resume {}`",
                        s.dir.display(),
                        record.count,
                        s.dir.display()
                    ),
                    None => format!(
                        "cell {id} is missing: it belongs to slice {owner} of {}, and no directory given is that slice",
                        record.count
                    ),
                });
            }
            many => {
                let dirs: Vec<String> = many.iter().map(|(s, _)| s.dir.display().to_string()).collect();
                problems.push(format!("cell {id} is duplicated: it is in {}", dirs.join(" and ")));
            }
        }
    }
    if problems.is_empty() {
        Ok(owners)
    } else {
        Err(setup(format!("cannot merge: {}", problems.join("; "))))
    }
}

/// Join the slices in `dirs` into a new results directory `out`, rendered
/// with its relative speeds against cell `reference`.
pub fn merge(out: &Path, dirs: &[PathBuf], reference: Option<String>) -> Result<Merged, RunnerError> {
    if dirs.is_empty() {
        return Err(setup("give the slices' results directories to merge".into()));
    }
    check_output(out, dirs)?;
    let slices = dirs.iter().map(|d| read_slice(d)).collect::<Result<Vec<_>, _>>()?;
    let plugins = check_alike(&slices)?;
    let owners = owners(&slices)?;
    let (cells, records, scaling) = joined(&owners)?;

    let first = &slices[0];
    // The sweep's span: from the first slice's start to the last event of
    // any, queueing between slices and later resumes included.
    let started = slices.iter().map(|s| s.started).min().unwrap_or(0);
    let ended = slices.iter().flat_map(|s| s.log.last()).map(|e| e.time_ms).max().unwrap_or(started);
    let run_id =
        format!("{}-merged-{}", crate::config::slug(&first.run.name), crate::runner::timestamp(started));
    let merged_from = merged_from(&slices, &owners);
    let environment = first.run.environment.clone().unwrap_or_else(|| start_of(first).environment.clone());
    let start = start_of(first);
    let mut store = Store::create(
        out,
        &RunRecord {
            schema: SCHEMA_VERSION,
            run_id: &run_id,
            name: &first.run.name,
            config_file: &first.run.config_file,
            config_text: first.run.config_text.as_deref(),
            config_commit: first.run.config_commit.as_deref(),
            created_unix_ms: started,
            environment: &environment,
            plugins: &plugins,
            base: &first.run.base,
            axes: &first.run.axes,
            cells: &cells,
            mock: first.mock,
            slice: None,
            merged_from: &merged_from,
        },
    )?;
    let headers = cells
        .iter()
        .map(|c| CellHeader {
            index: c.index,
            cell: c.id.clone(),
            label: Some(c.label.clone()),
            axes: c.axes.clone(),
        })
        .collect();
    let merged_start = RunStart {
        run_id: run_id.clone(),
        environment,
        cells: headers,
        resumed_cells: 0,
        reference: reference.clone(),
        plugins,
        ..start.clone()
    };
    store.event(&Stamped { event: Event::RunStart(Box::new(merged_start)), time_ms: started })?;
    for ((slice, _), (cell, record)) in owners.iter().zip(cells.iter().zip(&records)) {
        store.write_cell(&cell.slug, record)?;
        for event in events_of(slice, record) {
            store.event(&event)?;
        }
    }
    let failed: Vec<(String, PathBuf)> = owners
        .iter()
        .zip(&records)
        .filter(|(_, r)| r.summary.as_ref().is_some_and(|s| s.status == CellStatus::Failed))
        .map(|((slice, _), r)| (r.cell.clone(), slice.dir.clone()))
        .collect();
    store.event(&Stamped {
        event: Event::RunEnd(RunEnd {
            run_id,
            name: first.run.name.clone(),
            cells: cells.len(),
            failed: failed.len(),
            unavailable: records
                .iter()
                .filter(|r| r.summary.as_ref().is_some_and(|s| s.status == CellStatus::Unavailable))
                .count(),
            wall_s: ended.saturating_sub(started) as f64 / 1e3,
            scaling,
        }),
        time_ms: ended,
    })?;
    drop(store);
    if let Some(study) = &first.run.base.study {
        let summaries: Vec<CellSummary> = records.iter().filter_map(|r| r.summary.clone()).collect();
        let judged = crate::analysis::study::judge(study, &summaries);
        let json = serde_json::json!({ "study": study, "checks": judged });
        let bytes = serde_json::to_vec_pretty(&json).map_err(|e| setup(e.to_string()))?;
        write_atomic(&out.join(layout::STUDY), &bytes)?;
    }
    let rendered = rerender(out, None, reference)?;
    Ok(Merged { dir: out.into(), slices: slices.len(), cells: cells.len(), failed, rendered })
}

/// The merged run's cells, their records and the scaling over all of them.
type Joined = (Vec<Cell>, Vec<CellRecord>, Vec<CellScaling>);

/// The merged cells in matrix order, with their plans and records: each
/// summary with the machine it ran on (its slice's where an older summary
/// lacks one) and the scaling computed again over all cells.
fn joined(owners: &[(&Slice, &CellRecord)]) -> Result<Joined, RunnerError> {
    let mut cells: Vec<Cell> = Vec::new();
    let mut records: Vec<CellRecord> = Vec::new();
    for (slice, record) in owners {
        let cell = slice.run.cells.iter().find(|c| c.id == record.cell).ok_or_else(|| {
            setup(format!("{}: run.json lacks cell {} that cells/ holds", slice.dir.display(), record.cell))
        })?;
        // Each slice's file names were checked when its run.json was read;
        // two slices may still give one name to different cells.
        if cells.iter().any(|c| c.slug == cell.slug) {
            return Err(setup(format!(
                "{}: run.json gives cell {} the file name {:?}, which another slice gives another cell; the \
                 slice's run.json was altered",
                slice.dir.display(),
                cell.id,
                cell.slug
            )));
        }
        cells.push(cell.clone());
        let mut record = (*record).clone();
        if let Some(summary) = record.summary.as_mut().filter(|s| s.machine.is_none()) {
            summary.machine = slice.run.environment.as_ref().map(Machine::of);
        }
        records.push(record);
    }
    let mut summaries: Vec<CellSummary> = records.iter().filter_map(|r| r.summary.clone()).collect();
    let scaling = benchkit_schema::scaling::scaling(&summaries);
    benchkit_schema::scaling::apply(&mut summaries, &scaling);
    for (record, summary) in records.iter_mut().zip(summaries) {
        record.summary = Some(summary);
    }
    Ok((cells, records, scaling))
}

/// What `run.json` says of each slice merged.
fn merged_from(slices: &[Slice], owners: &[(&Slice, &CellRecord)]) -> Vec<MergedSlice> {
    slices
        .iter()
        .map(|s| MergedSlice {
            dir: s.dir.clone(),
            run_id: s.run.run_id.clone(),
            index: s.record.index,
            count: s.record.count,
            hostname: s.run.environment.as_ref().map_or_else(String::new, |e| e.hostname.clone()),
            cells: owners.iter().filter(|(o, _)| std::ptr::eq(*o, s)).map(|(_, c)| c.cell.clone()).collect(),
        })
        .collect()
}

/// A merged cell's events: its slice's, as one uninterrupted run sends
/// them, ending with `record`'s summary (its machine and the merged run's
/// scaling); its results where the slice's log lacks them.
fn events_of(slice: &Slice, record: &CellRecord) -> Vec<Stamped> {
    let mut events: Vec<Stamped> = cell_events(&slice.log, &record.cell)
        .into_iter()
        .filter(|e| !matches!(e.event, Event::CellSummary(_)))
        .collect();
    let logged: BTreeSet<u32> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::Cell(r) => Some(r.repeat),
            _ => None,
        })
        .collect();
    let time = events.last().map_or(slice.start.time_ms, |e| e.time_ms);
    for repeat in record.repeats.iter().filter(|r| !logged.contains(&r.repeat)) {
        events.push(Stamped {
            event: Event::Cell(Box::new(repeat.clone())),
            time_ms: repeat.finished_unix_ms.max(time),
        });
    }
    if let Some(summary) = &record.summary {
        let time = events.last().map_or(time, |e| e.time_ms);
        events.push(Stamped { event: Event::CellSummary(Box::new(summary.clone())), time_ms: time });
    }
    events
}
