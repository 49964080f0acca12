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

/// How `open` treats a missing file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    Create,
    Refuse,
}

/// The first 100 bytes of a SQLite database: its magic string, and the
/// big-endian `user_version` (offset 60) and `application_id` (offset 68).
const HEADER: usize = 100;
const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// What an existing file's header says, read before SQLite opens it: a
/// file that is not benchkit's is refused untouched (SQLite would replay
/// another program's journal into it, or leave its own files beside it).
/// `Ok(None)` for an empty file, which becomes a new history.
fn header(path: &Path) -> Result<Option<(i32, i32)>, String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    let mut bytes = Vec::with_capacity(HEADER);
    file.by_ref().take(HEADER as u64).read_to_end(&mut bytes).map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.is_empty() {
        return Ok(None);
    }
    if bytes.len() < HEADER || &bytes[..16] != MAGIC {
        return Err("not a SQLite database (its first bytes are not SQLite's header)".into());
    }
    let word = |at: usize| i32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    Ok(Some((word(68), word(60))))
}

/// Open the history at `path`; where there is none, create it (and its
/// folder) or refuse, as `missing` says. An existing file must be a
/// benchkit history (its header's application id), of this layout or an
/// older one (migrated), whole (SQLite's own check) and with benchkit's
/// own tables and views only, before anything is written to it.
pub fn open(path: &Path, missing: Missing) -> Result<Connection, HistoryError> {
    let refuse = |why: String| HistoryError::Refused { path: path.to_path_buf(), why };
    let exists = path.exists();
    if exists && !path.is_file() {
        return Err(refuse("it is not a file".into()));
    }
    if !exists && missing == Missing::Refuse {
        return Err(refuse("there is no such file; `benchkit history add <RESULTS_DIR>` makes one".into()));
    }
    if !exists {
        create(path).map_err(|e| refuse(format!("cannot make it: {e}")))?;
    }
    match header(path).map_err(refuse)? {
        Some((app, _)) if app != APPLICATION_ID => {
            return Err(refuse(format!(
                "it is a SQLite database of another program (application_id {app:#x}, a benchkit history has {APPLICATION_ID:#x})"
            )))
        }
        Some((_, layout)) if layout > LAYOUT => {
            return Err(refuse(format!(
                "it was written by a newer benchkit (layout {layout}, this one knows up to {LAYOUT}); read it with that benchkit"
            )))
        }
        _ => {}
    }
    let flags =
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut db = Connection::open_with_flags(path, flags).map_err(|e| refuse(e.to_string()))?;
    db.busy_timeout(BUSY).map_err(|e| refuse(e.to_string()))?;
    // The schema's own code (a view's, a trigger's) is not run where the
    // database could have been written by someone else.
    db.pragma_update(None, "trusted_schema", false).map_err(|e| refuse(e.to_string()))?;
    check(&db).map_err(refuse)?;
    patiently(|| db.pragma_update(None, "journal_mode", "WAL")).map_err(|e| refuse(e.to_string()))?;
    db.pragma_update(None, "foreign_keys", true).map_err(|e| refuse(e.to_string()))?;
    patiently(|| migrate(&mut db)).map_err(|e| refuse(format!("cannot bring it to layout {LAYOUT}: {e}")))?;
    ours(&db).map_err(refuse)?;
    Ok(db)
}

/// `step` again while another process holds the file, up to [`BUSY`]:
/// SQLite answers "busy" at once, without waiting, where waiting could
/// deadlock (two processes making a new file: one switching it to WAL
/// while the other lays it out).
fn patiently<T>(mut step: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let until = std::time::Instant::now() + BUSY;
    loop {
        match step() {
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                ) && std::time::Instant::now() < until =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// A new history at `path`, laid out whole in a file beside it and then
/// linked into place only if no file is there yet: another process never
/// sees a half-made one (a SQLite file not yet marked as benchkit's would
/// read as another program's). Where another process made it first, its
/// file is kept.
fn create(path: &Path) -> Result<(), String> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot make its folder: {e}"))?;
    let stamp =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let name = path.file_name().map_or("history".into(), |n| n.to_string_lossy().into_owned());
    let fresh = dir.join(format!(".{name}.{}.{stamp}.new", std::process::id()));
    let made = (|| -> rusqlite::Result<()> {
        let mut db = Connection::open(&fresh)?;
        db.pragma_update(None, "journal_mode", "WAL")?;
        migrate(&mut db)
    })();
    let linked = made.map_err(|e| e.to_string()).and_then(|()| match std::fs::hard_link(&fresh, path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("cannot link {} into place: {e}", fresh.display())),
    });
    for leftover in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{leftover}", fresh.display()));
    }
    linked
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

/// SQLite's own check of the file's pages and indexes, read only: a
/// damaged file is refused before anything is written to it.
fn check(db: &Connection) -> Result<(), String> {
    let said: String =
        db.query_row("PRAGMA quick_check", [], |r| r.get(0)).map_err(|e| format!("damaged: {e}"))?;
    match said.as_str() {
        "ok" => Ok(()),
        other => Err(format!("damaged: SQLite's check says {other}")),
    }
}

/// Every object of `db`'s schema against the layout's own: nothing more
/// (a trigger that would run during an add), nothing else (a view of the
/// same name that reads something else).
fn ours(db: &Connection) -> Result<(), String> {
    let objects = |db: &Connection| -> rusqlite::Result<Vec<(String, String, Option<String>)>> {
        let mut q = db.prepare("SELECT type, name, sql FROM sqlite_schema ORDER BY type, name")?;
        let rows = q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect()
    };
    let made = Connection::open_in_memory().and_then(|m| m.execute_batch(LAYOUT_1).map(|_| m));
    let want =
        made.and_then(|m| objects(&m)).map_err(|e| format!("cannot lay out a history to compare: {e}"))?;
    let got = objects(db).map_err(|e| format!("cannot read its schema: {e}"))?;
    match got.iter().find(|o| !want.contains(o)) {
        None if got.len() == want.len() => Ok(()),
        Some((kind, name, _)) => Err(format!(
            "its {kind} `{name}` is not a benchkit history's (another program changed it, or wrote it)"
        )),
        None => Err("it lacks tables or views a benchkit history has".into()),
    }
}
