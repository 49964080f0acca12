//! A kernel cache folder's manifest: each file's length and SHA-256 as the
//! last process to leave the folder found it, read back with every name
//! and size checked against a stated bound. Files are opened without
//! following links, and only regular files are read or cut.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::Path;

/// The manifest's file name in a cache folder.
pub const MANIFEST: &str = "benchkit-manifest.json";
/// The largest manifest read, and the most files it may name.
pub const MANIFEST_MAX_BYTES: u64 = 1 << 20;
pub const MANIFEST_MAX_FILES: usize = 4096;
/// The deepest a cache file may lie below its folder.
pub const MAX_DEPTH: usize = 8;

/// Each file's recorded length and SHA-256 (hex), by its path relative to
/// the folder with `/` between components.
pub type Manifest = BTreeMap<String, (u64, String)>;

/// Whether `name` is a path the manifest may name: plain components
/// joined by `/`, none empty, `.` or `..`, at most [`MAX_DEPTH`] + 1 deep.
pub fn plain(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    parts.len() <= MAX_DEPTH + 1
        && name.len() <= 4096
        && parts.iter().all(|p| !p.is_empty() && *p != "." && *p != ".." && !p.contains(['\\', '\0']))
}

/// The manifest of `dir`: `Ok(None)` where there is none, `Err` (why) where
/// it cannot be trusted.
pub fn read(dir: &Path) -> Result<Option<Manifest>, String> {
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
    let mut text = String::new();
    open_regular(&path, false)
        .and_then(|f| f.take(MANIFEST_MAX_BYTES).read_to_string(&mut text))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let raw: Manifest = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if raw.len() > MANIFEST_MAX_FILES {
        return Err(format!("{}: {} files, more than {MANIFEST_MAX_FILES}", path.display(), raw.len()));
    }
    let bad = |sha: &str| sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit());
    if let Some((name, _)) = raw.iter().find(|(name, (_, sha))| !plain(name) || bad(sha)) {
        return Err(format!("{}: {name:?} is not a plain relative path with a SHA-256", path.display()));
    }
    Ok(Some(raw))
}

/// Write `manifest` into `dir`, whole or not at all.
pub fn write(dir: &Path, manifest: &Manifest) -> std::io::Result<()> {
    if manifest.len() > MANIFEST_MAX_FILES {
        return Err(std::io::Error::other(format!(
            "{} files, more than the {MANIFEST_MAX_FILES} a manifest may name",
            manifest.len()
        )));
    }
    let text = serde_json::to_vec(manifest).map_err(std::io::Error::other)?;
    crate::atomic::write_atomic(&dir.join(MANIFEST), &text)
}

/// `path` opened for reading (or writing), refusing a link and anything
/// but a regular file.
pub fn open_regular(path: &Path, write: bool) -> std::io::Result<fs::File> {
    use rustix::fs::{Mode, OFlags};
    let access = if write { OFlags::WRONLY } else { OFlags::RDONLY };
    let fd = rustix::fs::open(
        path,
        access | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )?;
    let file = fs::File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// SHA-256 (hex) of the first `len` bytes of `path`, or `None` when it is shorter.
pub fn sha256_prefix(path: &Path, len: u64) -> std::io::Result<Option<String>> {
    let file = open_regular(path, false)?;
    let mut h = Sha256::new();
    let mut taken = file.take(len);
    let mut buf = vec![0u8; 64 * 1024];
    let mut copied = 0u64;
    loop {
        let n = taken.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        copied += n as u64;
    }
    if copied < len {
        return Ok(None);
    }
    Ok(Some(h.finalize().iter().map(|b| format!("{b:02x}")).collect()))
}

/// How many bytes of `path` a manifest may vouch for: a `.json.log` up to
/// its last line's end, a `.cbor` up to its last whole item (a half-written
/// entry is left for the next cell to cut), anything else whole.
pub fn whole_len(path: &Path, name: &str) -> std::io::Result<u64> {
    let len = open_regular(path, false)?.metadata()?.len();
    if name.ends_with(".json.log") {
        let mut bytes = Vec::new();
        open_regular(path, false)?.take(len).read_to_end(&mut bytes)?;
        return Ok(bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i as u64 + 1));
    }
    if name.ends_with(".cbor") {
        let mut bytes = Vec::new();
        open_regular(path, false)?.take(len).read_to_end(&mut bytes)?;
        return Ok(super::cbor::whole_prefix(&bytes) as u64);
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_manifest_is_refused_before_it_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let f = fs::File::create(tmp.path().join(MANIFEST)).unwrap();
        f.set_len(MANIFEST_MAX_BYTES + 1).unwrap();
        let e = read(tmp.path()).unwrap_err();
        assert!(
            e.contains(&format!("at most {MANIFEST_MAX_BYTES} bytes ({} bytes)", MANIFEST_MAX_BYTES + 1)),
            "{e}"
        );
    }

    #[test]
    fn names_outside_the_folder_and_bad_digests_are_refused() {
        for name in ["../x", "a//b", "/abs", "a/./b", "a\\b", ""] {
            assert!(!plain(name), "{name:?}");
        }
        assert!(plain("autotune/0.10.0/device-3-0/x.json.log"));
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join(MANIFEST), format!(r#"{{"a": [1, "{}"]}}"#, "g".repeat(64))).unwrap();
        assert!(read(tmp.path()).unwrap_err().contains("\"a\" is not a plain relative path with a SHA-256"));
    }

    #[test]
    fn only_whole_lines_and_whole_items_are_vouched_for() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("toc.json.log");
        fs::write(&log, b"{\"k\":1}\n{\"k\":2, half").unwrap();
        assert_eq!(whole_len(&log, "x/toc.json.log").unwrap(), 8);
        let chunk = tmp.path().join("chunk0.cbor");
        fs::write(&chunk, [0x01, 0x02, 0x43, 0x01]).unwrap();
        assert_eq!(whole_len(&chunk, "x/chunk0.cbor").unwrap(), 2);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_is_not_opened() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("target"), b"x").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("target"), tmp.path().join("link")).unwrap();
        assert!(open_regular(&tmp.path().join("link"), false).is_err());
        assert!(sha256_prefix(&tmp.path().join("link"), 1).is_err());
    }
}
