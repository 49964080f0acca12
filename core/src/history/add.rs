//! Adding a results directory to the history: read and checked as every
//! reader of results is, then written in one transaction, so a process
//! killed mid-add leaves the run wholly in or wholly out.

use super::key::Key;
use super::{History, HistoryError};
use crate::runner;
use benchkit_schema::{CellRecord, CellStatus, Machine};
use rusqlite::{params, TransactionBehavior};
use std::path::Path;

/// What an add did.
#[derive(Clone, Debug, PartialEq)]
pub struct Added {
    pub run_id: String,
    pub name: String,
    /// Cells added (finished or failed; those never started are not).
    pub cells: usize,
    /// The run was in the history already: nothing was added.
    pub already: bool,
}

/// Milliseconds an add waits before each cell, for the tests that kill
/// an add midway (`BENCHKIT_HISTORY_ADD_PAUSE_MS`, at most 10 s).
fn pause() {
    let ms = std::env::var("BENCHKIT_HISTORY_ADD_PAUSE_MS").ok().and_then(|v| v.parse::<u64>().ok());
    if let Some(ms) = ms.filter(|&ms| ms > 0) {
        std::thread::sleep(std::time::Duration::from_millis(ms.min(10_000)));
    }
}

/// Add the run in `dir`, labelled `label` where given; a run already in
/// the history (the same run id, begun the same millisecond: a copy of
/// its directory too) is left as it is.
pub fn add(history: &mut History, dir: &Path, label: Option<&str>) -> Result<Added, HistoryError> {
    let path = history.path.clone();
    add_to(history, dir, label).map_err(|e| match e {
        Failed::Sql(e) => HistoryError::NotAdded {
            dir: dir.to_path_buf(),
            why: format!("writing it to the history {}: {e}; nothing of it was kept", path.display()),
        },
        Failed::Other(e) => e,
    })
}

/// Why an add stopped: its own refusal, or the database's error.
enum Failed {
    Sql(rusqlite::Error),
    Other(HistoryError),
}

impl From<rusqlite::Error> for Failed {
    fn from(e: rusqlite::Error) -> Self {
        Self::Sql(e)
    }
}

impl From<HistoryError> for Failed {
    fn from(e: HistoryError) -> Self {
        Self::Other(e)
    }
}

fn add_to(history: &mut History, dir: &Path, label: Option<&str>) -> Result<Added, Failed> {
    let not_added = |why: String| HistoryError::NotAdded { dir: dir.to_path_buf(), why };
    let run = runner::read_run(dir).map_err(|e| not_added(e.to_string()))?;
    let (mock, records) = runner::load_run_cells(dir).map_err(|e| not_added(e.to_string()))?;
    if mock {
        return Err(not_added(
            "a --mock run: its figures are invented, and a history keeps measurements".into(),
        )
        .into());
    }
    let env = run.environment.as_ref().ok_or_else(|| {
        not_added("run.json does not record the machine it ran on (written before benchkit kept it)".into())
    })?;
    if let Some(label) = label.filter(|l| l.len() > 200 || l.chars().any(char::is_control)) {
        return Err(not_added(format!(
            "the label {:?} is not a plain line of at most 200 bytes",
            label.chars().take(40).collect::<String>()
        ))
        .into());
    }
    let tx = history.db.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let created = i64::try_from(run.created_unix_ms).unwrap_or(i64::MAX);
    let known: bool = tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM runs WHERE run_id = ?1 AND created_unix_ms = ?2)",
        params![run.run_id, created],
        |r| r.get(0),
    )?;
    let mut added = Added { run_id: run.run_id.clone(), name: run.name.clone(), cells: 0, already: known };
    if known {
        return Ok(added);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    tx.execute(
        "INSERT INTO runs (run_id, name, created_unix_ms, added_unix_ms, results_dir, schema, code_commit, label,
             benchkit_version, benchkit_commit, burn_version, hostname)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            run.run_id,
            run.name,
            created,
            now,
            absolute.display().to_string(),
            run.schema.as_deref().unwrap_or("0.1.0"),
            run.config_commit,
            label,
            env.benchkit_version,
            env.git_commit,
            env.burn_version,
            env.hostname,
        ],
    )?;
    let run_row = tx.last_insert_rowid();
    for cell in &run.cells {
        let Some(record) = records.iter().find(|r| r.cell == cell.id) else { continue };
        pause();
        let plan = serde_json::to_value(&cell.plan).map_err(|e| not_added(e.to_string()))?;
        let machine = record.machine.clone().unwrap_or_else(|| Machine::of(env));
        insert_cell(&tx, run_row, record, &cell.label, &Key::of(&plan, &machine))?;
        added.cells += 1;
    }
    tx.commit()?;
    Ok(added)
}

/// One cell's row and its repeats' rows.
fn insert_cell(
    tx: &rusqlite::Transaction,
    run: i64,
    record: &CellRecord,
    label: &str,
    key: &Key,
) -> Result<(), rusqlite::Error> {
    let s = record.summary.as_ref();
    let status = match s.map(|s| s.status) {
        Some(CellStatus::Ok) => "ok",
        Some(CellStatus::Unavailable) => "unavailable",
        Some(CellStatus::Failed) => "failed",
        None if !record.failures.is_empty() => "failed",
        None => "unfinished",
    };
    let median = |f: fn(&benchkit_schema::CellSummary) -> Option<&benchkit_schema::Spread>| {
        s.and_then(f).map(|x| x.median).filter(|m| m.is_finite())
    };
    let first = record.repeats.first();
    let engine = match first.and_then(|r| r.engine.as_ref()) {
        Some(e) => format!("{} on {}", e.name, e.device),
        None => s.and_then(|s| s.backend.clone()).unwrap_or_default(),
    };
    let label = if label.is_empty() { record.cell.as_str() } else { label };
    tx.execute(
        "INSERT INTO cells (run, cell, label, series, config, machine, engine, status, repeats, images_per_s,
             step_p50_ms, step_p90_ms, data_wait_pct, exposed_communication_pct, final_test_accuracy,
             time_to_target_s)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        params![
            run,
            record.cell,
            label,
            key.series,
            key.config,
            key.machine,
            engine,
            status,
            record.repeats.len() as i64,
            median(|s| s.images_per_s.as_ref()),
            median(|s| s.step_p50_ms.as_ref()),
            median(|s| s.step_p90_ms.as_ref()),
            median(|s| s.data_wait_pct.as_ref()),
            median(|s| s.exposed_communication_pct.as_ref()),
            median(|s| s.final_test_accuracy.as_ref()),
            median(|s| s.time_to_target_s.as_ref()),
        ],
    )?;
    let cell = tx.last_insert_rowid();
    for r in &record.repeats {
        let finite = |v: f64| v.is_finite().then_some(v);
        tx.execute(
            "INSERT OR IGNORE INTO repeats (cell, repeat, images_per_s, step_p50_ms) VALUES (?1, ?2, ?3, ?4)",
            params![cell, r.repeat as i64, finite(r.images_per_s), finite(r.step_ms.p50)],
        )?;
    }
    Ok(())
}
