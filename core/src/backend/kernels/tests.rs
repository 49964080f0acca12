//! The kernel cache as cells use it: checked, recorded, shared, cleared,
//! on files damaged in every way a crash or a hand can damage them.

use super::cache::*;
use super::manifest::MANIFEST;
use std::fs;
use std::path::{Path, PathBuf};

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
    write(&dir, "vulkan/0.10.0/spirv/chunk0.cbor", &[0x07; 100]);
    assert_eq!(cache.count(), KernelCount { compiled: 3, tuned: 2 });
    assert!(cache.record().unwrap(), "the only process records");
    drop(cache);
    let again = KernelCache::open(&dir).unwrap();
    assert_eq!((again.start, again.discarded.len()), (Start::Warm, 0), "{:?}", again.discarded);
    assert_eq!(again.count(), KernelCount { compiled: 3, tuned: 2 });
}

#[test]
fn damaged_truncated_grown_and_planted_files_are_discarded_with_a_line_each() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("k");
    let cache = KernelCache::open(&dir).unwrap();
    let chunk = write(&dir, "vulkan/v/spirv/chunk0.cbor", &[0x07; 1000]);
    let toc = write(&dir, "vulkan/v/spirv/toc.json.log", b"{\"k\":1}\n");
    let grown = write(&dir, "cuda/v/ptx/toc.json.log", b"{\"k\":1}\n");
    let tune = write(&dir, "autotune/v/dev/conv.json.log", b"{\"k\":1}\n{\"k\":2}\n");
    let flipped = write(&dir, "autotune/v/dev/matmul.json.log", b"{\"k\":1}\n");
    cache.record().unwrap();
    drop(cache);
    // Truncated, grown by a process that died, one byte flipped, planted.
    fs::OpenOptions::new().write(true).open(&chunk).unwrap().set_len(999).unwrap();
    fs::write(&grown, b"{\"k\":1}\n{\"k\":2, half").unwrap();
    fs::write(&flipped, b"{\"k\":9}\n").unwrap();
    let planted = write(&dir, "vulkan/v/other/chunk1.cbor", b"evil");
    let again = KernelCache::open(&dir).unwrap();
    let said = again.discarded.join("\n");
    assert!(!chunk.exists() && said.contains("999 bytes, shorter than the 1000 recorded"), "{said}");
    assert!(!toc.exists() && said.contains("removed with its folder's kernels"), "{said}");
    assert_eq!(fs::read(&grown).unwrap(), b"{\"k\":1}\n", "{said}");
    assert!(said.contains("bytes past the 8 recorded, cut"), "{said}");
    assert!(!flipped.exists() && said.contains("differ from those recorded"), "{said}");
    assert!(!planted.exists() && said.contains("not in the manifest"), "{said}");
    assert!(tune.exists());
    assert_eq!(again.start, Start::Warm, "the intact files are kept");
    assert_eq!(again.discarded.len(), 5, "{said}");
}

#[test]
fn a_half_written_entry_is_not_vouched_for_and_is_cut_next_time() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("k");
    let cache = KernelCache::open(&dir).unwrap();
    let toc = write(&dir, "vulkan/v/spirv/toc.json.log", b"{\"k\":1}\n{\"k\":2, ha");
    let chunk = write(&dir, "vulkan/v/spirv/chunk0.cbor", &[0x07, 0x07, 0x43, 0x01]);
    cache.record().unwrap();
    drop(cache);
    let again = KernelCache::open(&dir).unwrap();
    assert_eq!(fs::read(&toc).unwrap(), b"{\"k\":1}\n");
    assert_eq!(fs::read(&chunk).unwrap(), [0x07, 0x07]);
    assert_eq!(again.discarded.len(), 2, "{:?}", again.discarded);
}

#[test]
fn a_folder_in_use_is_neither_checked_nor_recorded_nor_cleared() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("k");
    let first = KernelCache::open(&dir).unwrap();
    // What the first process's cubecl writes while it trains, not yet recorded.
    let live = write(&dir, "autotune/v/dev/conv.json.log", b"{\"k\":1}\n");
    let second = KernelCache::open(&dir).unwrap();
    assert!(live.exists() && second.discarded.is_empty(), "{:?}", second.discarded);
    assert_eq!(second.start, Start::Warm);
    assert_eq!(clear(tmp.path())[0].1, Err("in use by a running cell; left as it is".to_string()));
    assert!(!first.record().unwrap(), "the second still trains: it records");
    assert!(second.record().unwrap(), "the last to leave records");
    drop((first, second));
    let third = KernelCache::open(&dir).unwrap();
    assert!(third.discarded.is_empty() && live.exists(), "{:?}", third.discarded);
    drop(third);
    assert_eq!(clear(tmp.path()), vec![("k".to_string(), Ok(()))]);
    assert!(!dir.exists());
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

#[cfg(unix)]
#[test]
fn a_link_in_the_folder_is_removed_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("k");
    let outside = write(tmp.path(), "outside.txt", b"keep me");
    fs::create_dir_all(dir.join("autotune")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("autotune/x.json.log")).unwrap();
    let cache = KernelCache::open(&dir).unwrap();
    assert!(fs::symlink_metadata(dir.join("autotune/x.json.log")).is_err());
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

#[test]
fn kernels_compiled_before_a_cell_is_killed_are_kept_for_the_next() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("k");
    let cache = KernelCache::open_keeping(&dir, std::time::Duration::from_millis(20)).unwrap();
    let toc = write(&dir, "cuda/v/ptx/toc.json.log", b"{\"k\":1}\n{\"k\":2}\n");
    write(&dir, "cuda/v/ptx/chunk0.cbor", &[0x07, 0x07]);
    let manifest = dir.join(MANIFEST);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !fs::read_to_string(&manifest).is_ok_and(|m| m.contains("toc.json.log")) {
        assert!(std::time::Instant::now() < deadline, "the folder was never recorded while held");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The cell dies without recording: half an entry past the last record.
    fs::write(&toc, b"{\"k\":1}\n{\"k\":2}\n{\"k\":3, ha").unwrap();
    drop(cache);
    let again = KernelCache::open(&dir).unwrap();
    assert_eq!(again.start, Start::Warm, "{:?}", again.discarded);
    assert_eq!(again.count(), KernelCount { compiled: 2, tuned: 0 }, "{:?}", again.discarded);
    assert_eq!(fs::read(&toc).unwrap(), b"{\"k\":1}\n{\"k\":2}\n");
}
