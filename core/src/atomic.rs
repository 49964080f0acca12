//! Files replaced whole: written beside their final name and renamed over
//! it, so that a reader, or a run killed mid-write, never sees half a file.
//! Every file benchkit replaces goes through [`write_atomic_with`].

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Write `bytes` to `path` through a temporary file in the same directory
/// (its name unique per process and call, so concurrent writers never
/// share one) and a rename; `prepare` runs on the temporary file before
/// the rename, e.g. to set its permissions. The temporary file is removed
/// when any step fails.
pub fn write_atomic_with(
    path: &Path,
    bytes: &[u8],
    prepare: impl FnOnce(&Path) -> io::Result<()>,
) -> io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    // Created new: a link or file already at the temporary name is never written through.
    let create = || {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        std::io::Write::write_all(&mut file, bytes)
    };
    let written = create().and_then(|()| prepare(&tmp)).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// [`write_atomic_with`] with nothing to prepare.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, bytes, |_| Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole_and_a_failed_write_leaves_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cell.json");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let failed = write_atomic_with(&path, b"third", |_| Err(io::Error::other("refused")));
        assert_eq!(failed.unwrap_err().to_string(), "refused");
        assert_eq!(std::fs::read(&path).unwrap(), b"second", "the old file stays");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, ["cell.json"], "no temporary file is left behind");
    }
}
