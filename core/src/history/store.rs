//! The history database on disk: one SQLite file, marked as benchkit's
//! (its `application_id`) and versioned (its `user_version`), created or
//! migrated in one transaction, refused when it is not benchkit's, is
//! damaged, or was written by a newer benchkit. Never replaced: a user's
//! history is data that cannot be measured again.

use super::HistoryError;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::path::Path;
use std::time::Duration;

/// `PRAGMA application_id` of a benchkit history: `bkhs` in ASCII.
pub const APPLICATION_ID: i32 = 0x626b_6873;
/// The layout this benchkit writes (`PRAGMA user_version`).
pub const LAYOUT: i32 = 1;
/// How long an add waits for another process's add to commit.
const BUSY: Duration = Duration::from_secs(60);

/// Layout 1: the runs, their cells (one row a cell, keyed into a series),
/// each cell's repeats, and the views a SQLite client reads.
const LAYOUT_1: &str = "
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    created_unix_ms INTEGER NOT NULL,
    added_unix_ms INTEGER NOT NULL,
    results_dir TEXT NOT NULL,
    schema TEXT NOT NULL,
    code_commit TEXT,
    label TEXT,
    benchkit_version TEXT NOT NULL,
    benchkit_commit TEXT NOT NULL,
    burn_version TEXT NOT NULL,
    hostname TEXT NOT NULL,
    UNIQUE (run_id, created_unix_ms)
);
CREATE TABLE cells (
    id INTEGER PRIMARY KEY,
    run INTEGER NOT NULL REFERENCES runs(id),
    cell TEXT NOT NULL,
    label TEXT NOT NULL,
    series TEXT NOT NULL,
    config TEXT NOT NULL,
    machine TEXT NOT NULL,
    engine TEXT NOT NULL,
    status TEXT NOT NULL,
    repeats INTEGER NOT NULL,
    images_per_s REAL,
    step_p50_ms REAL,
    step_p90_ms REAL,
    data_wait_pct REAL,
    exposed_communication_pct REAL,
    final_test_accuracy REAL,
    time_to_target_s REAL,
    UNIQUE (run, cell)
);
CREATE INDEX cells_by_series ON cells (series);
CREATE TABLE repeats (
    cell INTEGER NOT NULL REFERENCES cells(id),
    repeat INTEGER NOT NULL,
    images_per_s REAL,
    step_p50_ms REAL,
    PRIMARY KEY (cell, repeat)
);
CREATE VIEW points AS
    SELECT c.series, c.label AS cell_label, c.cell, r.name AS run_name, r.run_id,
           r.created_unix_ms, r.code_commit, r.label AS run_label, r.benchkit_version,
           r.benchkit_commit, r.burn_version, c.engine, c.machine, r.hostname, c.repeats,
           c.images_per_s, c.step_p50_ms, c.step_p90_ms, c.data_wait_pct,
           c.exposed_communication_pct, c.final_test_accuracy, c.time_to_target_s
    FROM cells c JOIN runs r ON r.id = c.run
    WHERE c.status = 'ok';
CREATE VIEW series AS
    SELECT series, cell_label, machine, COUNT(*) AS runs,
           MIN(created_unix_ms) AS first_unix_ms, MAX(created_unix_ms) AS last_unix_ms
    FROM points GROUP BY series;
";

/// Open the history at `path`, creating it (and its folder) where there is
/// none; an existing file must be a benchkit history of this layout or an
/// older one, which is migrated.
pub fn open(path: &Path) -> Result<Connection, HistoryError> {
    let refuse = |why: String| HistoryError::Refused { path: path.to_path_buf(), why };
    let exists = path.exists();
    if exists && !path.is_file() {
        return Err(refuse("it is not a file".into()));
    }
    if !exists {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| refuse(format!("cannot make its folder: {e}")))?;
        }
    }
    let flags =
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut db = Connection::open_with_flags(path, flags).map_err(|e| refuse(e.to_string()))?;
    db.busy_timeout(BUSY).map_err(|e| refuse(e.to_string()))?;
    // A file SQLite cannot read as a database fails here, with its own words.
    let (app, layout) = marks(&db).map_err(|e| refuse(format!("not a SQLite database ({e})")))?;
    if exists && app != APPLICATION_ID && !(app == 0 && layout == 0 && is_empty(&db)) {
        return Err(refuse(format!(
            "it is a SQLite database of another program (application_id {app:#x}, a benchkit history has {APPLICATION_ID:#x})"
        )));
    }
    if layout > LAYOUT {
        return Err(refuse(format!(
            "it was written by a newer benchkit (layout {layout}, this one knows up to {LAYOUT}); read it with that benchkit"
        )));
    }
    db.pragma_update(None, "journal_mode", "WAL").map_err(|e| refuse(e.to_string()))?;
    db.pragma_update(None, "foreign_keys", true).map_err(|e| refuse(e.to_string()))?;
    migrate(&mut db).map_err(|e| refuse(format!("cannot bring it to layout {LAYOUT}: {e}")))?;
    check(&db).map_err(refuse)?;
    Ok(db)
}

/// Its application id and layout.
fn marks(db: &Connection) -> rusqlite::Result<(i32, i32)> {
    let app = db.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let layout = db.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    // Reading the schema makes SQLite read the file's header and pages.
    db.query_row("SELECT COUNT(*) FROM sqlite_schema", [], |r| r.get::<_, i64>(0))?;
    Ok((app, layout))
}

fn is_empty(db: &Connection) -> bool {
    db.query_row("SELECT COUNT(*) FROM sqlite_schema", [], |r| r.get::<_, i64>(0)).is_ok_and(|n| n == 0)
}

/// Bring the layout up to [`LAYOUT`], one step a transaction taken for
/// writing first, so two processes opening a new file make it once.
fn migrate(db: &mut Connection) -> rusqlite::Result<()> {
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let layout: i32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if layout < 1 {
        tx.execute_batch(LAYOUT_1)?;
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
        tx.pragma_update(None, "user_version", 1)?;
    }
    tx.commit()
}

/// SQLite's own check of the file's pages and indexes: a damaged file is
/// refused before anything is added to it.
fn check(db: &Connection) -> Result<(), String> {
    let said: String =
        db.query_row("PRAGMA quick_check", [], |r| r.get(0)).map_err(|e| format!("damaged: {e}"))?;
    match said.as_str() {
        "ok" => Ok(()),
        other => Err(format!("damaged: SQLite's check says {other}")),
    }
}
