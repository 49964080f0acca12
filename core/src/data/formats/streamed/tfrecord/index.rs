//! Record lists of plain TFRecord files, kept between runs: listing a file
//! reads one header per record (ImageNet's 1.28 million training records
//! are 1.28 million small reads), and every cell of a matrix opens the
//! dataset again. A list is kept under a key of the file's canonical path,
//! size and modification time, only for files without faults, and is used
//! only when its records tile the file exactly; each read still checks the
//! record's header, so a file changed behind a kept list is named, not
//! misread.
//!
//! ```text
//! "BKTFIDX1" | u64 record count | u64 data length of each record   (little-endian)
//! ```

use super::frame::{Entry, FOOTER, HEADER, MAX_RECORD};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

const MAGIC: &[u8; 8] = b"BKTFIDX1";

/// `$BENCHKIT_CACHE_DIR/tfrecord-index`, else
/// `$XDG_CACHE_HOME/benchkit/tfrecord-index`, else `~/.cache/benchkit/tfrecord-index`.
fn dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("BENCHKIT_CACHE_DIR") {
        return Some(PathBuf::from(d).join("tfrecord-index"));
    }
    if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(xdg).join("benchkit/tfrecord-index"));
    }
    Some(PathBuf::from(std::env::var_os("HOME")?).join(".cache/benchkit/tfrecord-index"))
}

/// Where the list of `path` (of `meta`) is kept in `dir`.
fn key(dir: &Path, path: &Path, meta: &std::fs::Metadata) -> Option<PathBuf> {
    let canonical = path.canonicalize().ok()?;
    let modified = meta.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?;
    let mut h = Sha256::new();
    h.update(canonical.as_os_str().as_encoded_bytes());
    h.update(meta.len().to_le_bytes());
    h.update(modified.as_nanos().to_le_bytes());
    // The inode's change time cannot be set by programs (`touch -r`, `cp -p`
    // copy the modification time); device and inode tell a replaced file.
    for v in [meta.dev(), meta.ino(), meta.ctime() as u64, meta.ctime_nsec() as u64] {
        h.update(v.to_le_bytes());
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Some(dir.join(format!("{hex}.bkidx")))
}

/// The kept list of `path`, when there is one and it tiles the file.
pub(super) fn load(path: &Path, meta: &std::fs::Metadata) -> Option<Vec<Entry>> {
    load_from(&dir()?, path, meta)
}

/// Keep `entries` of `path`, listed from `meta` read at `listed_at`, for the next open.
pub(super) fn store(path: &Path, meta: &std::fs::Metadata, listed_at: SystemTime, entries: &[Entry]) {
    if let Some(dir) = dir() {
        store_in(&dir, path, meta, listed_at, entries);
    }
}

fn load_from(dir: &Path, path: &Path, meta: &std::fs::Metadata) -> Option<Vec<Entry>> {
    // The cache is anyone's to write: a regular file, no longer than a list
    // of this file can be (a record takes at least 16 bytes).
    let kept = key(dir, path, meta)?;
    let limit = 16 + meta.len() / 2;
    if !std::fs::symlink_metadata(&kept).ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    crate::bounds::open_regular(&kept).ok()?.take(limit + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() as u64 > limit {
        return None;
    }
    let (magic, rest) = bytes.split_at_checked(8)?;
    let (count, lens) = rest.split_at_checked(8)?;
    let count = u64::from_le_bytes(count.try_into().ok()?) as usize;
    if magic != MAGIC || count > super::frame::MAX_RECORDS || lens.len() != count.checked_mul(8)? {
        return None;
    }
    let mut at = 0u64;
    let mut entries = Vec::with_capacity(count);
    for chunk in lens.chunks_exact(8) {
        let len = u64::from_le_bytes(chunk.try_into().ok()?);
        if len > MAX_RECORD {
            return None;
        }
        entries.push(Entry::Record { offset: at, len });
        at = at.checked_add(HEADER + FOOTER)?.checked_add(len)?;
    }
    (at == meta.len()).then_some(entries)
}

/// A file modified in the last seconds is not kept: a change within the
/// same tick of the clock would leave its modification time as it was
/// (git's "racily clean" files).
const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

/// Keep `entries` of `path` in `dir`; a list with a fault, or of a file
/// still settling, is not kept, and failing to write is no error (the next
/// open lists again).
fn store_in(dir: &Path, path: &Path, meta: &std::fs::Metadata, listed_at: SystemTime, entries: &[Entry]) {
    let age = meta.modified().ok().and_then(|m| listed_at.duration_since(m).ok());
    let settled = age.is_some_and(|age| age >= SETTLED);
    let Some(target) = key(dir, path, meta).filter(|_| settled) else { return };
    let mut bytes = Vec::with_capacity(16 + 8 * entries.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for e in entries {
        match e {
            Entry::Record { len, .. } => bytes.extend_from_slice(&len.to_le_bytes()),
            Entry::Fault { .. } => return,
        }
    }
    let Some(parent) = target.parent() else { return };
    // Private, as the component cache that may share its parent wants it.
    if std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).is_ok() {
        let _ = crate::atomic::write_atomic(&target, &bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::formats::streamed::tfrecord::frame;

    fn entries_of(file: &Path) -> Vec<(u64, u64)> {
        frame::RecordFile::open(file)
            .unwrap()
            .entries
            .iter()
            .map(|e| match e {
                Entry::Record { offset, len } => (*offset, *len),
                Entry::Fault { .. } => panic!("a clean file"),
            })
            .collect()
    }

    #[test]
    fn a_settled_files_list_is_kept_and_read_back_and_a_changed_file_misses() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let file = dir.path().join("train-00000-of-00001");
        let bytes: Vec<u8> = [&b"one"[..], b"three", b""].iter().flat_map(|d| frame::frame(d)).collect();
        std::fs::write(&file, &bytes).unwrap();
        let listed = entries_of(&file);
        assert_eq!(listed, [(0, 3), (19, 5), (40, 0)]);
        let meta = || std::fs::metadata(&file).unwrap();
        let as_entries: Vec<Entry> =
            listed.iter().map(|&(offset, len)| Entry::Record { offset, len }).collect();

        let now = SystemTime::now();
        store_in(&cache, &file, &meta(), now, &as_entries);
        assert!(load_from(&cache, &file, &meta()).is_none(), "a file written just now is not kept");

        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options().write(true).open(&file).unwrap().set_modified(old).unwrap();
        store_in(&cache, &file, &meta(), now, &as_entries);
        let kept: Vec<(u64, u64)> = load_from(&cache, &file, &meta())
            .unwrap()
            .iter()
            .map(|e| match e {
                Entry::Record { offset, len } => (*offset, *len),
                Entry::Fault { .. } => panic!(),
            })
            .collect();
        assert_eq!(kept, listed);

        // Rewritten: another modification time, another key.
        std::fs::write(&file, &bytes[..19]).unwrap();
        assert!(load_from(&cache, &file, &meta()).is_none());
        // A list that does not tile the file is not used.
        std::fs::File::options().write(true).open(&file).unwrap().set_modified(old).unwrap();
        let short = meta();
        store_in(&cache, &file, &short, now, &as_entries);
        assert!(load_from(&cache, &file, &short).is_none(), "three records do not tile 19 bytes");
        let faulty = [Entry::Fault { offset: 0, message: String::new(), truncated: true, unread: 0 }];
        store_in(&cache, &file, &short, now, &faulty);
        assert!(load_from(&cache, &file, &short).is_none(), "a list with a fault is not kept");
    }
}
