//! The store a run writes: `run.json` once, each cell's record replaced
//! whole after each repeat, every event appended to `events.jsonl` as it
//! happens; a resumed run's store reopened where it stopped.

use super::layout::{CELLS, EVENTS, RUN};
use super::read::{read_cell, read_log, read_run};
use super::{CellRecord, RunRecord, StoredRun};
use crate::report::{Stamped, SCHEMA_VERSION};
use crate::runner::RunnerError;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// An open results directory.
pub struct Store {
    dir: PathBuf,
    events: std::fs::File,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RunnerError + '_ {
    move |source| RunnerError::Write { path: path.into(), source: with_free_space(path, source) }
}

/// `error`, with the space left on `path`'s file system when it is full
/// (ENOSPC, EDQUOT), so the user sees how much to free.
fn with_free_space(path: &Path, error: std::io::Error) -> std::io::Error {
    let full = [rustix::io::Errno::NOSPC.raw_os_error(), rustix::io::Errno::DQUOT.raw_os_error()];
    if !error.raw_os_error().is_some_and(|e| full.contains(&e)) {
        return error;
    }
    let on = path.ancestors().skip(1).find(|p| p.is_dir()).unwrap_or(Path::new("."));
    match rustix::fs::statvfs(on) {
        Ok(s) => std::io::Error::new(
            error.kind(),
            format!(
                "{error}; {} bytes free on the file system of {}",
                s.f_bavail.saturating_mul(s.f_frsize),
                on.display()
            ),
        ),
        Err(_) => error,
    }
}

/// Replace `path` with `bytes` whole ([`crate::atomic::write_atomic`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), RunnerError> {
    crate::atomic::write_atomic(path, bytes).map_err(io(path))
}

fn json<T: Serialize>(value: &T) -> Result<Vec<u8>, RunnerError> {
    serde_json::to_vec_pretty(value).map_err(|e| RunnerError::Setup(format!("cannot encode results: {e}")))
}

/// `dir/cells/`, made if missing, and a directory of its own: records are
/// written into it, never through a link out of the results directory.
fn own_cells(dir: &Path) -> Result<(), RunnerError> {
    let cells = dir.join(CELLS);
    std::fs::create_dir_all(&cells).map_err(io(dir))?;
    if !std::fs::symlink_metadata(&cells).is_ok_and(|m| m.is_dir()) {
        return Err(RunnerError::Setup(format!(
            "{} is not a directory but a link; a results directory's records stay inside it",
            cells.display()
        )));
    }
    Ok(())
}

impl Store {
    /// Create `dir` for a new run; refuses a directory that already holds one.
    pub fn create(dir: &Path, run: &RunRecord<'_>) -> Result<Self, RunnerError> {
        if dir.join(RUN).exists() {
            return Err(RunnerError::Setup(format!(
                "{} already holds a run; resume it with `benchkit run --resume {}` or choose another --output",
                dir.display(),
                dir.display()
            )));
        }
        own_cells(dir)?;
        write_atomic(&dir.join(RUN), &json(run)?)?;
        Self::open_events(dir)
    }

    /// Open the run stored in `dir` to resume it, with the events it logged.
    pub fn open(dir: &Path) -> Result<(Self, StoredRun, Vec<Stamped>), RunnerError> {
        let run = read_run(dir)?;
        // Its events would mix two schema versions under one header.
        if let Some(schema) = run.schema.as_deref().filter(|&s| s != SCHEMA_VERSION) {
            return Err(RunnerError::Setup(format!(
                "{} was written with results schema {schema}; this build ({SCHEMA_VERSION}) can report it but not \
                 resume it: resume it with the benchkit that started it, or run its config again",
                dir.display()
            )));
        }
        own_cells(dir)?;
        // Repaired before it is read, so what is replayed is what stays on disk.
        let store = Self::open_events(dir)?;
        let log = read_log(dir)?;
        Ok((store, run, log))
    }

    /// `events.jsonl` opened to append, never through a link (symbolic or
    /// hard); a last line a kill or a full disk left without its newline
    /// is ended with one when it is a whole event and cut away when it is
    /// not, so the next event starts on a fresh line and the log stays
    /// readable whole.
    fn open_events(dir: &Path) -> Result<Self, RunnerError> {
        use std::io::{Read, Seek, SeekFrom};
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join(EVENTS);
        let mut events = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
            .open(&path)
            .map_err(|e| {
                RunnerError::Setup(format!(
                    "cannot open {} to append (it must be a plain file): {e}",
                    path.display()
                ))
            })?;
        let meta = events.metadata().map_err(io(&path))?;
        if !meta.is_file() {
            let kind = crate::bounds::kind_of(meta.file_type());
            return Err(RunnerError::Setup(format!("{} is {kind}, not a regular file", path.display())));
        }
        if std::os::unix::fs::MetadataExt::nlink(&meta) != 1 {
            return Err(RunnerError::Setup(format!(
                "{} has other hard links; a results directory's log is its own file",
                path.display()
            )));
        }
        // The whole lines end at the last newline in the log's tail.
        let tail_len = meta.len().min(1 << 20);
        let mut tail = Vec::with_capacity(tail_len as usize);
        events.seek(SeekFrom::Start(meta.len() - tail_len)).map_err(io(&path))?;
        (&mut events).take(tail_len).read_to_end(&mut tail).map_err(io(&path))?;
        if tail.last().is_some_and(|&b| b != b'\n') {
            let whole = match tail.iter().rposition(|&b| b == b'\n') {
                Some(k) => meta.len() - tail_len + k as u64 + 1,
                None if tail_len == meta.len() => 0,
                None => {
                    return Err(RunnerError::Setup(format!(
                        "{}: its last line is over 1 MiB and cut off; the log is damaged",
                        path.display()
                    )))
                }
            };
            let last = &tail[tail.iter().rposition(|&b| b == b'\n').map_or(0, |k| k + 1)..];
            if serde_json::from_slice::<serde_json::Value>(last).is_ok_and(|v| v.is_object()) {
                events.write_all(b"\n").map_err(io(&path))?;
            } else {
                events.set_len(whole).map_err(io(&path))?;
            }
        }
        Ok(Self { dir: dir.into(), events })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `cells/<slug>.json`, `slug` one plain file name (the reader of
    /// `run.json` checks every cell's; this holds for any caller).
    fn cell_path(&self, slug: &str) -> Result<PathBuf, RunnerError> {
        crate::bounds::plain_component("a cell's file name", slug)?;
        Ok(self.dir.join(CELLS).join(format!("{slug}.json")))
    }

    /// The record of cell `slug`, if one was written.
    pub fn cell(&self, slug: &str) -> Result<Option<CellRecord>, RunnerError> {
        read_cell(&self.cell_path(slug)?, false)
    }

    /// Replace cell `slug`'s record.
    pub fn write_cell(&self, slug: &str, record: &CellRecord) -> Result<(), RunnerError> {
        write_atomic(&self.cell_path(slug)?, &json(record)?)
    }

    /// Replace the run's file `name` beside its records; only names
    /// [`super::layout`] reserves for the run, so that no file benchkit
    /// writes is one a reporter could take.
    pub fn write_file(&self, name: &str, bytes: &[u8]) -> Result<(), RunnerError> {
        if !super::layout::run_file(name) {
            return Err(RunnerError::Setup(format!(
                "{name} is not one of the run's files in runner::store::layout"
            )));
        }
        write_atomic(&self.dir.join(name), bytes)
    }

    /// Append an event to `events.jsonl`.
    pub fn event(&mut self, event: &Stamped) -> Result<(), RunnerError> {
        let mut line = event.to_line().into_bytes();
        line.push(b'\n');
        let path = self.dir.join(EVENTS);
        self.events.write_all(&line).map_err(io(&path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `events.jsonl` holding `log`, opened to append as a resume opens it:
    /// what the file holds after, or the error.
    fn reopened(log: &[u8]) -> Result<Vec<u8>, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(EVENTS), log).unwrap();
        Store::open_events(dir.path()).map_err(|e| e.to_string())?;
        Ok(std::fs::read(dir.path().join(EVENTS)).unwrap())
    }

    #[test]
    fn a_log_cut_mid_line_is_ended_or_cut_back_to_whole_lines() {
        assert_eq!(reopened(b"").unwrap(), b"");
        assert_eq!(reopened(b"{\"a\":1}\n").unwrap(), b"{\"a\":1}\n");
        // A whole event whose newline never reached the disk keeps its place.
        assert_eq!(reopened(b"{\"a\":1}\n{\"b\":2}").unwrap(), b"{\"a\":1}\n{\"b\":2}\n");
        // A torn one goes, also inside a character, also when it is all there is.
        assert_eq!(reopened(b"{\"a\":1}\n{\"b\":{\"c\":2}}x").unwrap(), b"{\"a\":1}\n");
        assert_eq!(
            reopened("{\"a\":1}\n{\"b\":\"×".as_bytes().split_last().unwrap().1).unwrap(),
            b"{\"a\":1}\n"
        );
        assert_eq!(reopened(b"{\"b\":").unwrap(), b"");
        let long = [b"{\"a\":1}\n".as_slice(), &vec![b'x'; (1 << 20) + 1]].concat();
        assert!(reopened(&long).unwrap_err().contains("its last line is over 1 MiB and cut off"));
    }

    #[test]
    fn a_log_linked_elsewhere_is_never_appended_to() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere.jsonl");
        std::fs::write(&elsewhere, b"{}\n").unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::hard_link(&elsewhere, run.join(EVENTS)).unwrap();
        let err = Store::open_events(&run).err().unwrap().to_string();
        assert!(err.contains("has other hard links"), "{err}");
        std::fs::remove_file(run.join(EVENTS)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, run.join(EVENTS)).unwrap();
        let err = Store::open_events(&run).err().unwrap().to_string();
        assert!(err.contains("cannot open") && err.contains("to append"), "{err}");
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"{}\n");
    }
}
