//! A results directory whose file system fills mid-run (a small tmpfs):
//! the run stops with an error naming the file it could not write and the
//! space left, every cell record already written is whole, and once space
//! is freed `--resume` finishes the run. Needs root to mount; skipped
//! without it unless `BENCHKIT_REQUIRE_NETNS` (set where CI runs as root).

use super::common::benchkit;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of `size` mounted at `at`, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Self> {
        let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        let mounted = root
            && Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                .arg(at)
                .status()
                .is_ok_and(|s| s.success());
        if mounted {
            return Some(Self(at.into()));
        }
        assert!(
            std::env::var_os("BENCHKIT_REQUIRE_NETNS").is_none(),
            "BENCHKIT_REQUIRE_NETNS is set, but a tmpfs cannot be mounted here (root is needed)"
        );
        benchkit::skip::record("filling a file system needs root to mount a tmpfs (BENCHKIT_REQUIRE_NETNS=1 makes this an error)");
        None
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_stops_the_run_naming_the_file_and_resume_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let Some(_fs) = Tmpfs::mount(&mnt, "1m") else { return };
    let cfg = super::common::small_config(
        dir.path(),
        "full",
        "",
        "source = \"synthetic\"\nshape = [1, 28, 28]\nnum_classes = 10",
        "",
        "[matrix]\n\"train.batch_size\" = [8, 16, 24, 32, 40, 48, 56, 64]\n",
    );
    // Room for the run record and a few cells (each ~7 KB, and its line of events), not for eight.
    let filler = mnt.join("filler");
    let free = || rustix::fs::statvfs(&mnt).map(|s| s.f_bavail * s.f_frsize).unwrap();
    std::fs::write(&filler, vec![1u8; (free() - (120 << 10)) as usize]).unwrap();
    let out = mnt.join("out");
    let assert = benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).arg("--mock").assert().failure();
    let err = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(err.contains(&format!("cannot write {}", out.display())), "{err}");
    assert!(
        err.contains("No space left on device") && err.contains("bytes free on the file system of"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let written: Vec<PathBuf> =
        std::fs::read_dir(out.join("cells")).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(!written.is_empty() && written.len() < 8, "{written:?}");
    for path in &written {
        let record: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap())
            .unwrap_or_else(|e| panic!("{} is not whole: {e}", path.display()));
        assert!(record["cell"].is_string(), "{record}");
    }

    std::fs::remove_file(&filler).unwrap();
    benchkit().args(["run", "--resume"]).arg(&out).arg("--mock").assert().success();
    let done = std::fs::read_dir(out.join("cells")).unwrap().count();
    assert_eq!(done, 8);
    benchkit().arg("report").arg(&out).assert().success();
}

#[test]
fn a_full_tmpdir_stops_a_gzip_tfrecord_read_naming_the_file_and_the_space() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("tmp");
    std::fs::create_dir(&mnt).unwrap();
    let Some(_fs) = Tmpfs::mount(&mnt, "8m") else { return };
    let packed = dir.path().join("packed");
    benchkit()
        .args(["shards", "pack"])
        .arg(super::common::repo().join("configs/data/fashion-mnist"))
        .arg(&packed)
        .args(["--format", "tfrecord", "--gzip"])
        .assert()
        .success();
    let out = dir.path().join("export");
    let assert = benchkit()
        .args(["data", "export"])
        .arg(&packed)
        .arg(&out)
        .args(["--num-classes", "10", "--limit", "2"])
        .env("TMPDIR", &mnt)
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(err.contains(&format!("{}/train-", packed.display())), "{err}");
    assert!(
        err.contains(&format!("inflated into TMPDIR ({})", mnt.display())) && err.contains("MiB free"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // Nothing of the inflated copies is left there.
    assert_eq!(std::fs::read_dir(&mnt).unwrap().count(), 0);
}
