//! One kernel cache folder, as cells use it. Every process training from
//! the folder holds a shared lock on it from the start of its cell to the
//! end; the first to find the folder idle (an exclusive lock granted)
//! checks it against its manifest, and the last to leave records it.
//!
//! A cache file is an input like any other: a file the manifest does not
//! vouch for (planted, damaged, or grown by a process that died) is cut
//! back to what was recorded or deleted, with a line of `discarded`; a
//! kernel file and its table of contents go together. cubecl reads only
//! what is left. Nothing here compiles or runs anything: it keeps files and
//! counts the entries cubecl appends (a kernel compiled, a tuning run).

use super::keeper::{Keeper, EVERY};
use super::manifest::{self, Manifest, MANIFEST, MAX_DEPTH};
use rustix::fs::{FlockOperation, Mode, OFlags};
use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Held by every process that uses the folder.
const LOCK: &str = "benchkit.lock";

/// How the manifest's temporary file begins while it is written (`write_atomic`).
const MANIFEST_TMP: &str = "benchkit-manifest.tmp";

/// `$BENCHKIT_CACHE_DIR/kernels`, else `$XDG_CACHE_HOME/benchkit/kernels`,
/// else `~/.cache/benchkit/kernels`.
pub fn root() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("BENCHKIT_CACHE_DIR") {
        return Some(PathBuf::from(dir).join("kernels"));
    }
    if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(xdg).join("benchkit/kernels"));
    }
    Some(PathBuf::from(std::env::var_os("HOME")?).join(".cache/benchkit/kernels"))
}

/// The folder name of an engine's cache on a device: the engine, then 16
/// hex digits of SHA-256 over everything that makes a kernel or a tuning
/// result valid (engine, burn's version, the device's name, API and
/// driver), so another device, driver or version never reads a stale entry.
pub fn key(engine: &str, burn_version: &str, device: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [engine, burn_version, device] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let digest = h.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{engine}-{hex}")
}

/// Whether a cell found kernels kept for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Nothing kept: every kernel is compiled and tuned in this cell.
    Cold,
    /// Kernels or tuning results kept by an earlier cell or run.
    Warm,
}

/// Entries cubecl appended to a cache folder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCount {
    /// Kernels compiled (entries of a compilation cache's table of contents).
    pub compiled: u64,
    /// Tuning runs finished (entries of the autotune cache).
    pub tuned: u64,
}

impl std::ops::Add for KernelCount {
    type Output = KernelCount;
    fn add(self, other: KernelCount) -> KernelCount {
        KernelCount { compiled: self.compiled + other.compiled, tuned: self.tuned + other.tuned }
    }
}

impl std::ops::Sub for KernelCount {
    type Output = KernelCount;
    fn sub(self, before: KernelCount) -> KernelCount {
        KernelCount {
            compiled: self.compiled.saturating_sub(before.compiled),
            tuned: self.tuned.saturating_sub(before.tuned),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("kernel cache {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CacheError + '_ {
    move |source| CacheError::Io { path: path.to_path_buf(), source }
}

/// What lies in a cache folder: its regular files by relative name (`/`
/// between components), cubecl's lock files beside them, and anything
/// else (a link, a device, a folder too deep). Reads only.
struct Listing {
    files: BTreeMap<String, PathBuf>,
    locks: Vec<PathBuf>,
    strange: Vec<PathBuf>,
}

fn listing(dir: &Path) -> Listing {
    let mut out = Listing { files: BTreeMap::new(), locks: Vec::new(), strange: Vec::new() };
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((at, depth)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&at) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            let rel = path.strip_prefix(dir).map(relative_name).unwrap_or_default();
            if kind.is_dir() && depth < MAX_DEPTH {
                stack.push((path, depth + 1));
            } else if !kind.is_file() {
                out.strange.push(path);
            } else if depth == 0 && (rel == MANIFEST || rel == LOCK) {
            } else if rel.ends_with(".lock") || (depth == 0 && rel.starts_with(MANIFEST_TMP)) {
                // cubecl's locks, and a manifest half written by a process that died.
                out.locks.push(path);
            } else {
                out.files.insert(rel, path);
            }
        }
    }
    out
}

fn relative_name(rel: &Path) -> String {
    rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/")
}

/// The folder's lock file, opened without following a link.
fn lock_file(dir: &Path) -> Result<fs::File, CacheError> {
    let path = dir.join(LOCK);
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::open(&path, flags, Mode::from_raw_mode(0o600)).map_err(|e| io(&path)(e.into()))?;
    Ok(fs::File::from(fd))
}

fn flock(file: &fs::File, op: FlockOperation) -> std::io::Result<()> {
    rustix::fs::flock(file, op).map_err(Into::into)
}

/// What was done to one file when the folder was checked.
enum Verdict {
    Kept,
    Cut(String),
    Removed(String),
}

/// One engine's cache folder, in use by this process for one cell.
#[derive(Debug)]
pub struct KernelCache {
    pub dir: PathBuf,
    pub start: Start,
    /// What was cut or deleted before the cell, one line a file.
    pub discarded: Vec<String>,
    /// The folder's lock file, locked shared while the cell trains.
    lock: fs::File,
    /// Records the folder while the cell trains.
    keeper: Keeper,
}

impl KernelCache {
    /// Open the cache folder `dir`, creating it, and hold it for the cell.
    /// If no other process is using it, first keep of its files only what
    /// its manifest vouches for ([`KernelCache::check`]).
    pub fn open(dir: &Path) -> Result<Self, CacheError> {
        Self::open_keeping(dir, EVERY)
    }

    /// [`KernelCache::open`], the folder recorded every `every` while held.
    pub(super) fn open_keeping(dir: &Path, every: std::time::Duration) -> Result<Self, CacheError> {
        if fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir()) {
            let why = std::io::Error::other("not a folder (a link or a file): remove it");
            return Err(CacheError::Io { path: dir.to_path_buf(), source: why });
        }
        fs::DirBuilder::new().recursive(true).create(dir).map_err(io(dir))?;
        let lock = lock_file(dir)?;
        let lock_path = dir.join(LOCK);
        let discarded = match flock(&lock, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                let discarded = Self::check(dir);
                flock(&lock, FlockOperation::LockShared).map_err(io(&lock_path))?;
                discarded
            }
            // Another process trains from it: it was checked when that one began.
            Err(_) => {
                flock(&lock, FlockOperation::LockShared).map_err(io(&lock_path))?;
                Vec::new()
            }
        };
        let keeper = Keeper::start(dir, every);
        let mut cache = Self { dir: dir.to_path_buf(), start: Start::Cold, discarded, lock, keeper };
        let held = cache.count();
        if held.compiled + held.tuned > 0 {
            cache.start = Start::Warm;
        }
        Ok(cache)
    }

    /// Keep of `dir`'s files only what its manifest vouches for: a file it
    /// does not name, a file shorter than recorded or whose recorded bytes
    /// differ is deleted; bytes past the recorded length are cut. A kernel
    /// file and its table of contents stand or fall together: a deletion in
    /// a folder holding a `toc.json.log` deletes the folder's other files.
    /// cubecl's lock files are deleted (no process is writing). An
    /// untrustworthy manifest empties the folder. Called with the folder
    /// locked exclusively; what was done, a line a file.
    fn check(dir: &Path) -> Vec<String> {
        let mut said = Vec::new();
        let manifest = manifest::read(dir).unwrap_or_else(|why| {
            said.push(format!("the manifest cannot be trusted ({why}): every file discarded"));
            Some(Manifest::new())
        });
        let manifest = manifest.unwrap_or_default();
        let found = listing(dir);
        for path in found.locks {
            let _ = fs::remove_file(path);
        }
        for path in found.strange {
            let _ = fs::remove_file(&path).or_else(|_| fs::remove_dir_all(&path));
            said.push(format!("{}: not a regular file, removed", path.display()));
        }
        let mut fallen: Vec<String> = Vec::new();
        for (name, path) in &found.files {
            match Self::verdict(path, manifest.get(name)) {
                Verdict::Kept => {}
                Verdict::Cut(why) => said.push(format!("{}: {why}", path.display())),
                Verdict::Removed(why) => {
                    said.push(format!("{}: {why}", path.display()));
                    fallen.push(parent_of(name));
                }
            }
        }
        for (name, path) in &found.files {
            let folder = parent_of(name);
            let paired = found.files.contains_key(&format!("{folder}/toc.json.log"));
            if paired && fallen.contains(&folder) && path.exists() {
                let _ = fs::remove_file(path);
                said.push(format!("{}: removed with its folder's kernels", path.display()));
            }
        }
        said
    }

    /// Keep `path` if `recorded` vouches for it, cutting what grew past it.
    fn verdict(path: &Path, recorded: Option<&(u64, String)>) -> Verdict {
        let remove = |why: String| match fs::remove_file(path) {
            Ok(()) => Verdict::Removed(format!("{why}, removed")),
            Err(e) => Verdict::Removed(format!("{why}, and could not be removed: {e}")),
        };
        let Some((len, sha)) = recorded else { return remove("not in the manifest".into()) };
        let on_disk = match manifest::open_regular(path, false).and_then(|f| f.metadata()) {
            Ok(meta) => meta.len(),
            Err(e) => return remove(format!("unreadable ({e})")),
        };
        match manifest::sha256_prefix(path, *len) {
            Ok(Some(found)) if &found == sha && on_disk > *len => {
                let cut = manifest::open_regular(path, true).and_then(|f| f.set_len(*len));
                match cut {
                    Ok(()) => Verdict::Cut(format!("{} bytes past the {len} recorded, cut", on_disk - len)),
                    Err(e) => remove(format!("grown past the {len} recorded bytes and not cut ({e})")),
                }
            }
            Ok(Some(found)) if &found == sha => Verdict::Kept,
            Ok(Some(_)) => remove(format!("its first {len} bytes differ from those recorded")),
            Ok(None) => remove(format!("{on_disk} bytes, shorter than the {len} recorded")),
            Err(e) => remove(format!("unreadable ({e})")),
        }
    }

    /// Leave the folder, its whole entries recorded in the manifest while
    /// this process still holds it; the last process to leave (an exclusive
    /// lock granted) records it once more, alone. True when this one was
    /// the last.
    pub fn record(&self) -> Result<bool, CacheError> {
        self.keeper.stop();
        // Vouched for while still held: a process that checks the folder
        // between this one's unlock and its exclusive lock keeps it all.
        vouch(&self.dir)?;
        let lock_path = self.dir.join(LOCK);
        flock(&self.lock, FlockOperation::Unlock).map_err(io(&lock_path))?;
        if flock(&self.lock, FlockOperation::NonBlockingLockExclusive).is_err() {
            return Ok(false);
        }
        let written = vouch(&self.dir);
        let _ = flock(&self.lock, FlockOperation::Unlock);
        written.map(|()| true)
    }

    /// What cubecl has appended so far: the entries of every compilation
    /// table of contents (`toc.json.log`) and of the autotune results (the
    /// `.json.log` files under `autotune/`), one line an entry. Reads only.
    pub fn count(&self) -> KernelCount {
        let mut count = KernelCount::default();
        for (name, path) in listing(&self.dir).files {
            if !name.ends_with(".json.log") {
                continue;
            }
            let lines = count_lines(&path);
            if name.starts_with("autotune/") {
                count.tuned += lines;
            } else if name.ends_with("/toc.json.log") {
                count.compiled += lines;
            }
        }
        count
    }
}

impl Drop for KernelCache {
    fn drop(&mut self) {
        self.keeper.stop();
        let _ = flock(&self.lock, FlockOperation::Unlock);
    }
}

/// The folder part of a relative name (`""` at the top).
fn parent_of(name: &str) -> String {
    name.rsplit_once('/').map_or(String::new(), |(folder, _)| folder.to_string())
}

fn count_lines(path: &Path) -> u64 {
    let Ok(mut file) = manifest::open_regular(path, false) else { return 0 };
    let mut buf = [0u8; 64 * 1024];
    let mut lines = 0;
    while let Ok(n) = file.read(&mut buf) {
        if n == 0 {
            break;
        }
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
    }
    lines
}

/// Each cache folder under `root` with its bytes and files, for `benchkit kernels list`.
pub fn list(root: &Path) -> Vec<(String, u64, usize)> {
    let Ok(entries) = fs::read_dir(root) else { return Vec::new() };
    let mut out: Vec<(String, u64, usize)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| {
            let files = listing(&e.path()).files;
            let bytes = files.values().filter_map(|p| fs::symlink_metadata(p).ok()).map(|m| m.len()).sum();
            (e.file_name().to_string_lossy().into_owned(), bytes, files.len())
        })
        .collect();
    out.sort();
    out
}

/// Delete every cache folder under `root` that no process is using; each
/// folder's name, and why it was kept where it was.
pub fn clear(root: &Path) -> Vec<(String, Result<(), String>)> {
    let mut out = Vec::new();
    for (name, _, _) in list(root) {
        let dir = root.join(&name);
        let done = lock_file(&dir).map_err(|e| e.to_string()).and_then(|lock| {
            flock(&lock, FlockOperation::NonBlockingLockExclusive)
                .map_err(|_| "in use by a running cell; left as it is".to_string())?;
            fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))
        });
        out.push((name, done));
    }
    out
}

/// Write `dir`'s manifest: every file's whole entries, by length and
/// SHA-256. Files only grow while cells train (cubecl appends a kernel's
/// bytes, then its table-of-contents line), so what is vouched for is a
/// prefix each file keeps. The tables of contents are measured before
/// the files they point into, so that a line vouched for never points past
/// the bytes vouched for; the manifest is replaced whole, atomically.
pub(super) fn vouch(dir: &Path) -> Result<(), CacheError> {
    let files = listing(dir).files;
    let (tables, data): (Vec<_>, Vec<_>) = files.iter().partition(|(name, _)| name.ends_with(".json.log"));
    let mut lengths = Vec::with_capacity(files.len());
    for (name, path) in tables.into_iter().chain(data) {
        lengths.push((name, path, manifest::whole_len(path, name).map_err(io(path))?));
    }
    let mut manifest = Manifest::new();
    for (name, path, len) in lengths {
        if let Some(sha) = manifest::sha256_prefix(path, len).map_err(io(path))? {
            manifest.insert(name.clone(), (len, sha));
        }
    }
    manifest::write(dir, &manifest).map_err(io(&dir.join(MANIFEST)))
}

/// Each file's length, by relative name: whether anything was appended.
pub(super) fn lengths(dir: &Path) -> BTreeMap<String, u64> {
    listing(dir)
        .files
        .into_iter()
        .filter_map(|(name, path)| Some((name, fs::symlink_metadata(&path).ok()?.len())))
        .collect()
}
