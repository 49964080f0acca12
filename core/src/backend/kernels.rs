//! The kernel cache of burn's JIT engines (cubecl's `wgpu` and `cuda`):
//! the kernels cubecl compiled (SPIR-V, PTX) and its autotune results,
//! kept in benchkit's cache folder, one folder per engine, device, driver
//! and engine version, shared by every cell process and by later runs.
//!
//! A cache file is an input like any other: benchkit records each file's
//! length and SHA-256 in a manifest when a cell ends, and before the next
//! cell starts any file the manifest does not vouch for (planted, damaged,
//! truncated, or grown by a process that died) is cut back to what was
//! recorded or deleted, with a warning. cubecl reads only what is left.
//!
//! It must not compile or run anything: it only keeps files and counts
//! the entries cubecl appends to them (a kernel compiled, a tuning run).

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The manifest of a cache folder: each file's length and SHA-256.
const MANIFEST: &str = "benchkit-manifest.json";
/// Held while a process checks or records the folder.
const LOCK: &str = "benchkit.lock";
/// The largest manifest read, and the most files it may name.
pub const MANIFEST_MAX_BYTES: u64 = 1 << 20;
pub const MANIFEST_MAX_FILES: usize = 4096;
/// A cubecl lock file older than this was left by a process that died.
const STALE_LOCK: std::time::Duration = std::time::Duration::from_secs(120);
/// The deepest a cache file may lie below its folder.
const MAX_DEPTH: usize = 8;

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
    /// Kernels or tuning results kept by an earlier cell or run (at least
    /// one entry in a file the manifest vouched for).
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

/// One engine's cache folder, checked, for one cell.
#[derive(Debug)]
pub struct KernelCache {
    pub dir: PathBuf,
    pub start: Start,
    /// What was cut or deleted before the cell, one line a file.
    pub discarded: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("kernel cache {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CacheError + '_ {
    move |source| CacheError::Io { path: path.to_path_buf(), source }
}

/// Every regular file below `dir` but the manifest and the lock, by its
/// path relative to `dir` with `/` between components; anything else (a
/// link, a device, a folder too deep) is listed apart, to be removed.
fn files(dir: &Path) -> (BTreeMap<String, PathBuf>, Vec<PathBuf>) {
    let (mut found, mut strange) = (BTreeMap::new(), Vec::new());
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((at, depth)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&at) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() && depth < MAX_DEPTH {
                stack.push((path, depth + 1));
            } else if kind.is_file() {
                let rel = path.strip_prefix(dir).map(relative_name).unwrap_or_default();
                if depth == 0 && (rel == MANIFEST || rel == LOCK) {
                    continue;
                }
                // cubecl's own lock beside a file it is writing: left to
                // cubecl, unless a process that died left it long ago.
                if rel.ends_with(".lock") {
                    let stale = fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE_LOCK));
                    if stale {
                        let _ = fs::remove_file(&path);
                    }
                    continue;
                }
                found.insert(rel, path);
            } else {
                strange.push(path);
            }
        }
    }
    (found, strange)
}

fn relative_name(rel: &Path) -> String {
    rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/")
}

/// Whether `name` is a path the manifest may name: plain components
/// joined by `/`, none empty, `.` or `..`, at most [`MAX_DEPTH`] deep.
fn plain(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    parts.len() <= MAX_DEPTH + 1
        && name.len() <= 4096
        && parts
            .iter()
            .all(|p| !p.is_empty() && *p != "." && *p != ".." && !p.contains('\\') && !p.contains('\0'))
}

/// Each file's recorded length and SHA-256 (hex).
type Manifest = BTreeMap<String, (u64, String)>;

/// The manifest of `dir`, or why it cannot be trusted.
fn read_manifest(dir: &Path) -> Result<Option<Manifest>, String> {
    let path = dir.join(MANIFEST);
    let meta = match fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if !meta.is_file() || meta.len() > MANIFEST_MAX_BYTES {
        return Err(format!(
            "{}: not a regular file of at most {MANIFEST_MAX_BYTES} bytes ({} bytes)",
            path.display(),
            meta.len()
        ));
    }
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let raw: BTreeMap<String, (u64, String)> =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if raw.len() > MANIFEST_MAX_FILES {
        return Err(format!("{}: {} files, more than {MANIFEST_MAX_FILES}", path.display(), raw.len()));
    }
    if let Some((name, _)) = raw.iter().find(|(name, (_, sha))| !plain(name) || sha.len() != 64) {
        return Err(format!("{}: {name:?} is not a plain relative path with a SHA-256", path.display()));
    }
    Ok(Some(raw))
}

/// SHA-256 (hex) of the first `len` bytes of `path`, or `None` when it is shorter.
fn sha256_prefix(path: &Path, len: u64) -> std::io::Result<Option<String>> {
    let mut file = fs::File::open(path)?;
    let mut h = Sha256::new();
    let copied = std::io::copy(&mut (&mut file).take(len), &mut HashWriter(&mut h))?;
    if copied < len {
        return Ok(None);
    }
    Ok(Some(h.finalize().iter().map(|b| format!("{b:02x}")).collect()))
}

struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An exclusive lock on `dir`'s lock file, held until dropped.
struct Locked(fs::File);

impl Locked {
    fn take(dir: &Path) -> Result<Self, CacheError> {
        let path = dir.join(LOCK);
        let file =
            fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io(&path))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| CacheError::Io { path: path.clone(), source: e.into() })?;
        Ok(Self(file))
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, rustix::fs::FlockOperation::Unlock);
    }
}

impl KernelCache {
    /// Open the cache folder `dir`, creating it, and keep of its files only
    /// what its manifest vouches for: a file it does not name is deleted, a
    /// file shorter than recorded or whose recorded bytes differ is deleted,
    /// bytes past the recorded length are cut. An unreadable manifest
    /// empties the folder. Each is a line of `discarded`.
    pub fn open(dir: &Path) -> Result<Self, CacheError> {
        if fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir()) {
            let why = std::io::Error::other("not a folder (a link or a file): remove it");
            return Err(CacheError::Io { path: dir.to_path_buf(), source: why });
        }
        fs::DirBuilder::new().recursive(true).create(dir).map_err(io(dir))?;
        let _lock = Locked::take(dir)?;
        let mut discarded = Vec::new();
        let manifest = read_manifest(dir).unwrap_or_else(|why| {
            discarded.push(format!("the manifest cannot be trusted ({why}): every file discarded"));
            Some(Manifest::new())
        });
        let (found, strange) = files(dir);
        for path in strange {
            let _ = fs::remove_file(&path).or_else(|_| fs::remove_dir_all(&path));
            discarded.push(format!("{}: not a regular file, removed", path.display()));
        }
        let manifest = manifest.unwrap_or_default();
        let mut kept = 0;
        for (name, path) in found {
            match Self::check(&path, manifest.get(&name)) {
                Ok(None) => kept += 1,
                Ok(Some(why)) => discarded.push(format!("{}: {why}", path.display())),
                Err(e) => discarded.push(format!("{}: {e}, removed", path.display())),
            }
        }
        let mut cache = Self { dir: dir.to_path_buf(), start: Start::Cold, discarded };
        let held = cache.count();
        if kept > 0 && held.compiled + held.tuned > 0 {
            cache.start = Start::Warm;
        }
        Ok(cache)
    }

    /// Keep `path` if `recorded` vouches for it (cutting what grew past
    /// it); else remove it. What was done, or `None` when it was kept whole.
    fn check(path: &Path, recorded: Option<&(u64, String)>) -> std::io::Result<Option<String>> {
        let Some((len, sha)) = recorded else {
            fs::remove_file(path)?;
            return Ok(Some("not in the manifest, removed".into()));
        };
        let on_disk = fs::metadata(path)?.len();
        match sha256_prefix(path, *len)? {
            Some(found) if &found == sha => {
                if on_disk > *len {
                    fs::OpenOptions::new().write(true).open(path)?.set_len(*len)?;
                    return Ok(Some(format!("{} bytes past the {len} recorded, cut", on_disk - len)));
                }
                Ok(None)
            }
            Some(_) => {
                fs::remove_file(path)?;
                Ok(Some(format!("its first {len} bytes differ from those recorded, removed")))
            }
            None => {
                fs::remove_file(path)?;
                Ok(Some(format!("{on_disk} bytes, shorter than the {len} recorded, removed")))
            }
        }
    }

    /// Record every file's length and SHA-256 as the cell leaves them.
    pub fn record(&self) -> Result<(), CacheError> {
        let _lock = Locked::take(&self.dir)?;
        let mut manifest = Manifest::new();
        for (name, path) in files(&self.dir).0.into_iter().take(MANIFEST_MAX_FILES) {
            let len = fs::metadata(&path).map_err(io(&path))?.len();
            if let Some(sha) = sha256_prefix(&path, len).map_err(io(&path))? {
                manifest.insert(name, (len, sha));
            }
        }
        let text = serde_json::to_vec(&manifest).unwrap_or_default();
        let path = self.dir.join(MANIFEST);
        crate::atomic::write_atomic(&path, &text).map_err(io(&path))
    }

    /// What cubecl has appended so far: the entries of every compilation
    /// table of contents (`toc.json.log`) and of the autotune results (the
    /// `.json.log` files under `autotune/`), one line an entry.
    pub fn count(&self) -> KernelCount {
        let mut count = KernelCount::default();
        for (name, path) in files(&self.dir).0 {
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

fn count_lines(path: &Path) -> u64 {
    let Ok(mut file) = fs::File::open(path) else { return 0 };
    let _ = file.seek(SeekFrom::Start(0));
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

/// Each cache folder under `root` with its bytes, for `benchkit kernels list`.
pub fn list(root: &Path) -> Vec<(String, u64, usize)> {
    let Ok(entries) = fs::read_dir(root) else { return Vec::new() };
    let mut out: Vec<(String, u64, usize)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| {
            let (found, _) = files(&e.path());
            let bytes = found.values().filter_map(|p| fs::metadata(p).ok()).map(|m| m.len()).sum();
            (e.file_name().to_string_lossy().into_owned(), bytes, found.len())
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn the_key_changes_with_engine_version_and_device() {
        let k = key("cubecl-wgpu", "0.21.0", "llvmpipe on vulkan (Mesa 22.3.6)");
        assert!(k.starts_with("cubecl-wgpu-") && k.len() == "cubecl-wgpu-".len() + 16, "{k}");
        assert_eq!(k, key("cubecl-wgpu", "0.21.0", "llvmpipe on vulkan (Mesa 22.3.6)"));
        assert_ne!(k, key("cubecl-wgpu", "0.21.1", "llvmpipe on vulkan (Mesa 22.3.6)"));
        assert_ne!(k, key("cubecl-wgpu", "0.21.0", "llvmpipe on vulkan (Mesa 23.0.0)"));
        assert_ne!(key("ab", "c", "d"), key("a", "bc", "d"), "parts are length-prefixed");
    }

    #[test]
    fn a_folder_with_nothing_kept_starts_cold_then_warm_once_recorded() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("k");
        let cache = KernelCache::open(&dir).unwrap();
        assert_eq!((cache.start, cache.discarded.len()), (Start::Cold, 0));
        write(&dir, "autotune/0.10.0/dev/matmul.json.log", b"{\"key\":1}\n{\"key\":2}\n");
        write(&dir, "vulkan/0.10.0/spirv/toc.json.log", b"{\"k\":1}\n{\"k\":2}\n{\"k\":3}\n");
        write(&dir, "vulkan/0.10.0/spirv/chunk0.cbor", &[0xa2; 100]);
        assert_eq!(cache.count(), KernelCount { compiled: 3, tuned: 2 });
        cache.record().unwrap();
        let again = KernelCache::open(&dir).unwrap();
        assert_eq!((again.start, again.discarded.len()), (Start::Warm, 0));
        assert_eq!(again.count(), KernelCount { compiled: 3, tuned: 2 });
    }

    #[test]
    fn damaged_truncated_grown_and_planted_files_are_discarded_with_a_line_each() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("k");
        let cache = KernelCache::open(&dir).unwrap();
        let chunk = write(&dir, "vulkan/v/spirv/chunk0.cbor", &[7u8; 1000]);
        let toc = write(&dir, "vulkan/v/spirv/toc.json.log", b"{\"k\":1}\n");
        let tune = write(&dir, "autotune/v/dev/conv.json.log", b"{\"k\":1}\n{\"k\":2}\n");
        let flipped = write(&dir, "autotune/v/dev/matmul.json.log", b"{\"k\":1}\n");
        cache.record().unwrap();
        // Truncated, grown by a process that died, one byte flipped, planted.
        fs::OpenOptions::new().write(true).open(&chunk).unwrap().set_len(999).unwrap();
        fs::write(&toc, b"{\"k\":1}\n{\"k\":2, half").unwrap();
        fs::write(&flipped, b"{\"k\":9}\n").unwrap();
        let planted = write(&dir, "vulkan/v/spirv/chunk1.cbor", b"evil");
        let again = KernelCache::open(&dir).unwrap();
        let said = again.discarded.join("\n");
        assert!(!chunk.exists() && said.contains("999 bytes, shorter than the 1000 recorded"), "{said}");
        assert_eq!(fs::read(&toc).unwrap(), b"{\"k\":1}\n", "{said}");
        assert!(said.contains("bytes past the 8 recorded, cut"), "{said}");
        assert!(!flipped.exists() && said.contains("differ from those recorded"), "{said}");
        assert!(!planted.exists() && said.contains("not in the manifest"), "{said}");
        assert!(tune.exists());
        assert_eq!(again.start, Start::Warm, "the intact files are kept");
        assert_eq!(again.discarded.len(), 4, "{said}");
    }

    #[test]
    fn an_untrustworthy_manifest_empties_the_folder() {
        for manifest in [
            &b"{not json"[..],
            br#"{"../../etc/passwd": [1, "0000000000000000000000000000000000000000000000000000000000000000"]}"#,
            br#"{"a": [1, "short"]}"#,
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("k");
            let kept = write(&dir, "autotune/v/x.json.log", b"{}\n");
            write(&dir, MANIFEST, manifest);
            let cache = KernelCache::open(&dir).unwrap();
            assert!(!kept.exists(), "{}", String::from_utf8_lossy(manifest));
            assert_eq!(cache.start, Start::Cold);
            assert!(cache.discarded[0].starts_with("the manifest cannot be trusted"), "{:?}", cache.discarded);
        }
    }

    #[test]
    fn an_oversized_manifest_is_refused_before_it_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("k");
        fs::create_dir_all(&dir).unwrap();
        let f = fs::File::create(dir.join(MANIFEST)).unwrap();
        f.set_len(MANIFEST_MAX_BYTES + 1).unwrap();
        let e = read_manifest(&dir).unwrap_err();
        assert!(
            e.contains(&format!("at most {MANIFEST_MAX_BYTES} bytes ({} bytes)", MANIFEST_MAX_BYTES + 1)),
            "{e}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_link_in_the_folder_is_removed_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("k");
        let outside = write(tmp.path(), "outside.txt", b"keep me");
        fs::create_dir_all(dir.join("autotune")).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("autotune/x.json.log")).unwrap();
        let cache = KernelCache::open(&dir).unwrap();
        assert!(!dir.join("autotune/x.json.log").exists());
        assert_eq!(fs::read(&outside).unwrap(), b"keep me");
        assert!(cache.discarded[0].contains("not a regular file"), "{:?}", cache.discarded);
    }

    #[cfg(unix)]
    #[test]
    fn a_cache_folder_that_is_a_link_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, tmp.path().join("k")).unwrap();
        let e = KernelCache::open(&tmp.path().join("k")).unwrap_err().to_string();
        assert!(e.contains("not a folder (a link or a file)"), "{e}");
    }

    #[test]
    fn list_names_each_folder_with_its_bytes_and_files() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "cubecl-wgpu-0123/autotune/a.json.log", b"12345");
        write(tmp.path(), "cubecl-wgpu-0123/vulkan/toc.json.log", b"123");
        assert_eq!(list(tmp.path()), vec![("cubecl-wgpu-0123".to_string(), 8, 2)]);
    }
}
