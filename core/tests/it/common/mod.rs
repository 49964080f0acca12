//! Shared test setup: the deliberately bad guest components, compiled once,
//! and the real `benchkit` binary with a private component cache.
#![allow(dead_code)]

pub mod hosts;
pub mod ranks;
pub mod trace_check;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Held by every test that makes network namespaces or watches this
/// machine's: they share one test binary, and a test that compares the
/// namespaces before and after must not see another's.
pub static NETNS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// [`NETNS`], whether or not a test that held it panicked.
pub fn netns_lock() -> std::sync::MutexGuard<'static, ()> {
    NETNS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether namespaces can be made here; else the test is skipped (said on
/// stderr), or fails where `BENCHKIT_REQUIRE_NETNS` is set.
/// The lock that runs shaping tests one at a time, where links can be
/// shaped here (see [`can_shape`]).
pub fn shaping() -> Option<std::sync::MutexGuard<'static, ()>> {
    let one = netns_lock();
    can_shape().then_some(one)
}

pub fn can_shape() -> bool {
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    let tools =
        ["ip", "tc"].iter().all(|t| Command::new(t).arg("-V").output().is_ok_and(|o| o.status.success()));
    if root && tools {
        return true;
    }
    assert!(
        std::env::var_os("BENCHKIT_REQUIRE_NETNS").is_none(),
        "BENCHKIT_REQUIRE_NETNS is set, but this is not root with iproute2's ip and tc"
    );
    benchkit::skip::record(
        "emulated links need root and iproute2 (ip, tc); BENCHKIT_REQUIRE_NETNS=1 makes this an error",
    );
    false
}

/// A cell record's status, once its summary is written.
pub fn status(record: &benchkit_schema::CellRecord) -> benchkit_schema::CellStatus {
    record.summary.as_ref().map(|s| s.status).expect("a finished cell")
}

/// `summary.json` of results directory `out`, read through the schema's types.
pub fn run_summary(out: &Path) -> benchkit_schema::RunSummary {
    let path = out.join("summary.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The cell record in `path` (`cells/<slug>.json`), read through the schema's types.
pub fn record(path: &Path) -> benchkit_schema::CellRecord {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every cell record of the results directory `out` (`cells/*.json`), in
/// matrix order, read through the schema's types: a renamed or retyped
/// field fails here, naming the file, not later as a null.
pub fn records(out: &Path) -> Vec<benchkit_schema::CellRecord> {
    let mut all: Vec<benchkit_schema::CellRecord> = std::fs::read_dir(out.join("cells"))
        .unwrap_or_else(|e| panic!("{}: {e}", out.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect();
    all.sort_by_key(|r| r.index);
    all
}

/// Path of fixture component `name` (crate name with `_`), building them on first use.
pub fn fixture(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/plugins/Cargo.toml");
        let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fixture-plugins");
        let status = Command::new(env!("CARGO"))
            .args(["build", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
            .arg(&manifest)
            .arg("--target-dir")
            .arg(&target)
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            // A compiler wrapper (clippy as CI's) is for the crate under test, not for the guests.
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .env_remove("CLIPPY_ARGS")
            .status()
            .expect("run cargo for the fixture plugins");
        assert!(status.success(), "building the fixture plugins failed");
        target.join("wasm32-wasip2/release")
    });
    dir.join(format!("{name}.wasm"))
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("core/ is in the repo").to_path_buf()
}

/// The Python of the torch virtual environment the tests run in
/// (`VIRTUAL_ENV`, as `scripts/tch-env.sh` sets it), else `python3`.
pub fn python() -> PathBuf {
    std::env::var_os("VIRTUAL_ENV")
        .map(|v| Path::new(&v).join("bin/python"))
        .unwrap_or_else(|| "python3".into())
}

/// The component cache the end-to-end tests share.
pub fn cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("component-cache")
}

/// The `benchkit` binary, using [`cache`].
pub fn benchkit() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("benchkit").expect("the benchkit binary");
    cmd.env("BENCHKIT_CACHE_DIR", cache());
    cmd
}

/// A small, fast config `<name>.toml` in `dir`: `top` top-level keys, the
/// `[data]` body `data`, extra `[train]` keys `train`, and `tail` after the
/// json reporter (more reporters, a `[matrix]`). Quarter-width ResNet-18,
/// one epoch of three steps of 32 images, unless `train` sets those keys.
pub fn small_config(dir: &Path, name: &str, top: &str, data: &str, train: &str, tail: &str) -> PathBuf {
    let given = |key: &str| train.lines().any(|l| l.split('=').next().is_some_and(|k| k.trim() == key));
    let defaults: String =
        [("epochs", "1"), ("batch_size", "32"), ("warmup_steps", "1"), ("max_steps_per_epoch", "3")]
            .iter()
            .filter(|(k, _)| !given(k))
            .map(|(k, v)| format!("{k} = {v}\n"))
            .collect();
    let text = format!(
        r#"name = "{name}"
seed = 3
{top}

[data]
{data}

[transform]
plugin = "builtin:normalize"
config = {{ mean = [0.286], std = [0.353] }}

[model]
plugin = "builtin:resnet"
config = {{ depth = 18, stem = "imagenet", width = 0.125 }}

[train]
{defaults}{train}

[[reporters]]
plugin = "builtin:json"

{tail}
"#
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// A VOC-layout detection sample in `dir/voc`, written by `benchkit data
/// detection-sample` from the shipped Fashion-MNIST subset: `train` and
/// `test` canvases `size` pixels high.
pub fn detection_sample(dir: &Path, train: usize, test: usize, size: u32) -> PathBuf {
    let voc = dir.join("voc");
    benchkit()
        .args(["data", "detection-sample"])
        .arg(repo().join("configs/data/fashion-mnist"))
        .arg(&voc)
        .args(["--train", &train.to_string(), "--test", &test.to_string(), "--size", &size.to_string()])
        .args(["--max-objects", "3"])
        .assert()
        .success();
    voc
}

/// A Chromium binary: `BENCHKIT_CHROMIUM`, or the first of the usual names on PATH.
pub fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BENCHKIT_CHROMIUM") {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser", "google-chrome"].map(|n| dir.join(n)))
        .find(|p| p.is_file())
}

/// [`chromium`], or the test recorded as skipped for want of it (an error
/// where `BENCHKIT_REQUIRE_CHROMIUM` is set, as in CI).
pub fn chromium_or_skip() -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        assert!(
            std::env::var_os("BENCHKIT_REQUIRE_CHROMIUM").is_none(),
            "BENCHKIT_REQUIRE_CHROMIUM is set but no chromium was found (install Debian's `chromium`)"
        );
        benchkit::skip::record("no chromium on PATH (set BENCHKIT_REQUIRE_CHROMIUM=1 to make this an error)");
    }
    found
}
