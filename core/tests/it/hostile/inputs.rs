//! Hostile inputs through the real binary: data files and results
//! directories written to crash, exhaust, block or escape. Each is made
//! here (small on disk: sparse files, streamed compression bombs) and run
//! under a memory cap (a cgroup, where this machine lets one be made) and
//! a deadline. Every one must end in a clear error naming what was wrong:
//! exit status 1, no panic, no signal, nothing written outside the
//! directories the command was given.

use super::common::{benchkit, cache, repo};
use flate2::write::GzEncoder;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The memory a hostile input may make benchkit take, at most.
pub(crate) const CAP_BYTES: u64 = 1 << 30;
/// The time it may take, at most (a hang is a failure).
pub(crate) const DEADLINE: Duration = Duration::from_secs(120);

/// A memory cgroup holding one command, where one can be made (root and a
/// cgroup v1 memory controller or v2 with it delegated).
struct Cgroup(PathBuf);

impl Cgroup {
    fn make(name: &str) -> Option<Self> {
        let (dir, limit) = if Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists() {
            (PathBuf::from("/sys/fs/cgroup/memory"), "memory.limit_in_bytes")
        } else if std::fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control")
            .is_ok_and(|c| c.contains("memory"))
        {
            (PathBuf::from("/sys/fs/cgroup"), "memory.max")
        } else {
            return None;
        };
        let group = dir.join(format!("benchkit-hostile-{}-{name}", std::process::id()));
        std::fs::create_dir(&group).ok()?;
        let made = Self(group);
        std::fs::write(made.0.join(limit), CAP_BYTES.to_string()).ok()?;
        // No swap to spill into where the controller counts it.
        let _ = std::fs::write(made.0.join("memory.memsw.limit_in_bytes"), CAP_BYTES.to_string());
        let _ = std::fs::write(made.0.join("memory.swap.max"), "0");
        Some(made)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// What a hostile run ended with.
pub(crate) struct Ended {
    pub(crate) code: Option<i32>,
    pub(crate) stderr: String,
}

/// Run benchkit with `args` under the cap and the deadline.
pub(crate) fn run_capped(name: &str, args: &[OsString]) -> Ended {
    let binary = assert_cmd::cargo::cargo_bin("benchkit");
    let group = Cgroup::make(name);
    // CI runs as root with a memory controller: there the cap is not optional.
    assert!(
        group.is_some() || std::env::var_os("BENCHKIT_REQUIRE_NETNS").is_none(),
        "BENCHKIT_REQUIRE_NETNS is set (root expected), but no memory cgroup could be made for {name}"
    );
    let mut command = match &group {
        Some(Cgroup(dir)) => {
            let mut c = Command::new("sh");
            c.arg("-c").arg("echo $$ > \"$0/cgroup.procs\" && exec \"$@\"").arg(dir).arg(&binary);
            c
        }
        None => {
            benchkit::skip::record(&format!(
                "{name} ran without its 1 GiB memory cap: a memory cgroup needs root (BENCHKIT_REQUIRE_NETNS=1 makes this an error)"
            ));
            Command::new(&binary)
        }
    };
    let err_path = std::env::temp_dir().join(format!("benchkit-hostile-{}-{name}.err", std::process::id()));
    let err_file = std::fs::File::create(&err_path).unwrap();
    let mut child = command
        .args(args)
        .env("BENCHKIT_CACHE_DIR", cache())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err_file)
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name}: still running after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_file(&err_path);
    use std::os::unix::process::ExitStatusExt;
    assert!(
        status.signal().is_none(),
        "{name}: killed by signal {:?} (the memory cap?)\n{stderr}",
        status.signal()
    );
    Ended { code: status.code(), stderr }
}

/// Every path under `dir`, relative to it.
pub(crate) fn listing(dir: &Path) -> BTreeSet<PathBuf> {
    let mut all = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(path.clone());
            }
            all.insert(path.strip_prefix(dir).unwrap().to_path_buf());
        }
    }
    all
}

/// Run `args` on the hostile input made in `root`: it fails with status 1,
/// an error holding every one of `says`, no panic, and nothing new in
/// `root` outside `out` (the directory the command may write).
pub(crate) fn refused(name: &str, root: &Path, out: Option<&Path>, args: &[OsString], says: &[&str]) {
    let before = listing(root);
    let ended = run_capped(name, args);
    let err = &ended.stderr;
    assert_eq!(ended.code, Some(1), "{name}: status {:?}\n{err}", ended.code);
    assert!(!err.contains("panicked"), "{name}: {err}");
    for word in says {
        assert!(err.contains(word), "{name}: {word:?} not in\n{err}");
    }
    let new: Vec<PathBuf> = listing(root)
        .difference(&before)
        .filter(|p| out.is_none_or(|o| !root.join(p).starts_with(o)))
        .cloned()
        .collect();
    assert!(new.is_empty(), "{name}: wrote outside the directories it was given: {new:?}");
}

pub(crate) fn args(parts: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    parts.iter().map(|p| p.as_ref().to_os_string()).collect()
}

/// A packed copy of the shipped Fashion-MNIST sample in `root/shards`.
fn packed(root: &Path) -> PathBuf {
    let dir = root.join("shards");
    benchkit()
        .args(["shards", "pack"])
        .arg(repo().join("configs/data/fashion-mnist"))
        .arg(&dir)
        .args(["--shard-size", "4MiB"])
        .assert()
        .success();
    dir
}

/// JSON file `name` in `dir`, rewritten with `edit` made to it.
pub(crate) fn edit_json(dir: &Path, name: &str, edit: impl FnOnce(&mut Value)) {
    let path = dir.join(name);
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(&path, value.to_string()).unwrap();
}

fn edit_manifest(dir: &Path, edit: impl FnOnce(&mut Value)) {
    edit_json(dir, "manifest.json", edit);
}

#[test]
fn shard_manifests_that_escape_or_overclaim_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let shards = packed(root.path());
    let out = root.path().join("export");
    let export = |dir: &Path| args(&[&"data", &"export", &dir, &out, &"--limit", &"2"]);

    // Class names that would be folders outside the export.
    edit_manifest(&shards, |m| {
        let n = m["num_classes"].as_u64().unwrap() as usize;
        let mut names: Vec<Value> = (0..n).map(|c| json!(format!("c{c}"))).collect();
        names[1] = json!("../../escaped");
        m["classes"] = Value::Array(names);
    });
    refused(
        "class-escape",
        root.path(),
        Some(&out),
        &export(&shards),
        &["\"../../escaped\"", "plain file name"],
    );

    // Billions of classes declared.
    edit_manifest(&shards, |m| {
        m["classes"] = json!([]);
        m["num_classes"] = json!(u32::MAX);
    });
    refused("class-count", root.path(), Some(&out), &export(&shards), &["4294967295", "bound"]);

    // A shard file named outside the directory.
    edit_manifest(&shards, |m| {
        m["num_classes"] = json!(10);
        m["train"][0]["file"] = json!("../../etc/passwd");
    });
    refused("shard-path", root.path(), Some(&out), &export(&shards), &["a shard file", "../../etc/passwd"]);
}

/// A shard directory of one record of `payload` (label 0) per split.
fn one_record_shards(dir: &Path, payload: &[u8], shape: [u32; 3]) {
    std::fs::create_dir_all(dir).unwrap();
    let len = (payload.len() as u32).to_le_bytes();
    let mut shard = b"BKSHARD1".to_vec();
    shard.extend_from_slice(&len);
    shard.extend_from_slice(&crc32c::crc32c(&len).to_le_bytes());
    shard.extend_from_slice(payload);
    shard.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let mut index = b"BKINDEX1".to_vec();
    index.extend_from_slice(&1u64.to_le_bytes());
    index.extend_from_slice(&8u64.to_le_bytes());
    let mut entries = Vec::new();
    for split in ["train", "test"] {
        std::fs::write(dir.join(format!("{split}.bkshard")), &shard).unwrap();
        std::fs::write(dir.join(format!("{split}.bkidx")), &index).unwrap();
        entries.push(json!([{"file": format!("{split}.bkshard"), "index": format!("{split}.bkidx"), "records": 1, "bytes": shard.len()}]));
    }
    let manifest = json!({"format": "benchkit-shards", "version": 1, "num_classes": 2, "classes": [], "shape": shape,
        "source": "hostile", "train": entries[0], "test": entries[1]});
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
}

fn raw_payload(channels: u8, height: u32, width: u32, pixels: usize) -> Vec<u8> {
    let mut p = 0u32.to_le_bytes().to_vec();
    p.extend_from_slice(&[0, channels, 0, 0]);
    p.extend_from_slice(&height.to_le_bytes());
    p.extend_from_slice(&width.to_le_bytes());
    p.extend(std::iter::repeat_n(7u8, pixels));
    p
}

#[test]
fn records_that_parse_but_lie_are_named_as_damage() {
    let root = tempfile::tempdir().unwrap();
    // 10 bytes for a 1 × 4 × 4 image; then 2 channels.
    for (name, payload) in [("short", raw_payload(1, 4, 4, 10)), ("two-channels", raw_payload(2, 4, 4, 32))] {
        let dir = root.path().join(name);
        one_record_shards(&dir, &payload, [1, 4, 4]);
        let verify = args(&[&"shards", &"verify", &dir]);
        refused(
            &format!("verify-{name}"),
            root.path(),
            None,
            &verify,
            &["train.bkshard", "at byte 8", "raw pixels"],
        );
        let out = root.path().join(format!("{name}-packed"));
        let pack = args(&[&"shards", &"pack", &dir, &out]);
        refused(&format!("pack-{name}"), root.path(), Some(&out), &pack, &["raw pixels"]);
    }
}

/// A gzip stream of `bytes` zero bytes after `head`, written as it is compressed.
fn gzip_bomb(path: &Path, head: &[u8], bytes: u64) {
    let mut gz = GzEncoder::new(std::fs::File::create(path).unwrap(), flate2::Compression::fast());
    gz.write_all(head).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..bytes >> 20 {
        gz.write_all(&zeros).unwrap();
    }
    gz.finish().unwrap();
}

#[test]
fn compression_bombs_and_sparse_giants_stop_at_their_bounds() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("export");
    // IDX images whose header is honest about 3 GiB of zeros, gzip-compressed.
    let idx = root.path().join("idx");
    std::fs::create_dir(&idx).unwrap();
    let mut head = vec![0, 0, 8, 3];
    for d in [3u32 << 20, 32, 32] {
        head.extend_from_slice(&d.to_be_bytes());
    }
    gzip_bomb(&idx.join("train-images-idx3-ubyte.gz"), &head, 3 << 30);
    for name in ["train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"] {
        std::fs::copy(repo().join("configs/data/fashion-mnist").join(name), idx.join(name)).unwrap();
    }
    let export = |dir: &Path| args(&[&"data", &"export", &dir, &out, &"--limit", &"2"]);
    refused(
        "idx-bomb",
        root.path(),
        Some(&out),
        &export(&idx),
        &["train-images-idx3-ubyte.gz", "3221225488, over the bound of 1073741824"],
    );

    // The same, not compressed: a sparse file of 3 GiB.
    let file = std::fs::File::create(idx.join("train-images-idx3-ubyte")).unwrap();
    file.set_len(3 << 30).unwrap();
    std::fs::remove_file(idx.join("train-images-idx3-ubyte.gz")).unwrap();
    refused("idx-sparse", root.path(), Some(&out), &export(&idx), &["3221225472 bytes, over the bound"]);

    // A WebDataset shard whose long-name member claims 3 GiB (sparse).
    let wds = root.path().join("wds");
    std::fs::create_dir(&wds).unwrap();
    for split in ["train", "val"] {
        let mut header = tar::Header::new_gnu();
        header.set_path("././@LongLink").unwrap();
        header.set_entry_type(tar::EntryType::GNULongName);
        header.set_size(3 << 30);
        header.set_cksum();
        let path = wds.join(format!("{split}-0.tar"));
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(header.as_bytes()).unwrap();
        file.set_len(512 + (3 << 30) + 1024).unwrap();
    }
    let export =
        args(&[&"data", &"export", &wds, &out, &"--source-format", &"webdataset", &"--num-classes", &"2"]);
    refused(
        "tar-long-name",
        root.path(),
        Some(&out),
        &export,
        &["train-0.tar", "long-name member declares 3221225472 bytes"],
    );

    // An image folder whose first image's header declares 100000 × 100000 pixels.
    let folder = root.path().join("folder");
    for (split, name) in [("train", "a"), ("train", "b"), ("test", "a"), ("test", "b")] {
        let class = folder.join(split).join(name);
        std::fs::create_dir_all(&class).unwrap();
        let mut png = Vec::new();
        image::codecs::png::PngEncoder::new(&mut png)
            .write_image(&[0u8; 1], 1, 1, image::ExtendedColorType::L8)
            .unwrap_or_else(|_| unreachable!());
        // IHDR's width and height, then its CRC made again.
        png[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        png[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        let crc = crc32fast(&png[12..29]);
        png[29..33].copy_from_slice(&crc.to_be_bytes());
        std::fs::write(class.join("0.png"), &png).unwrap();
    }
    let export = args(&[&"data", &"export", &folder, &out]);
    refused("png-giant", root.path(), Some(&out), &export, &["0.png", "declares 100000×100000 pixels"]);
}

/// CRC-32 (IEEE), as PNG's chunks carry it.
fn crc32fast(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

use image::ImageEncoder;

#[test]
fn ids_in_data_files_never_leave_the_dataset() {
    let root = tempfile::tempdir().unwrap();
    // A VOC image set listing an id outside the dataset, packed (TFRecord keeps boxes).
    let voc = root.path().join("voc");
    for d in ["JPEGImages", "Annotations", "ImageSets/Main"] {
        std::fs::create_dir_all(voc.join(d)).unwrap();
    }
    std::fs::write(root.path().join("secret.xml"), "<annotation/>").unwrap();
    std::fs::write(voc.join("ImageSets/Main/train.txt"), "../../secret\n").unwrap();
    std::fs::write(voc.join("ImageSets/Main/test.txt"), "a\n").unwrap();
    let out = root.path().join("packed");
    let pack = args(&[&"shards", &"pack", &voc, &out, &"--format", &"tfrecord"]);
    refused("voc-id", root.path(), Some(&out), &pack, &["train.txt", "line 1", "\"../../secret\""]);

    // A captions table naming an image outside the dataset, trained on.
    let captions = root.path().join("captions");
    std::fs::create_dir_all(&captions).unwrap();
    std::fs::write(root.path().join("secret.png"), b"").unwrap();
    std::fs::write(captions.join("captions.csv"), "image_id,caption\n../secret,a cat\nb,a dog\n").unwrap();
    let cfg = root.path().join("captions.toml");
    std::fs::write(
        &cfg,
        format!(
            "name = \"captions\"\n[data]\npath = {:?}\n[model]\nplugin = \"builtin:resnet\"\n[train]\nbatch_size = 2\n",
            captions.display().to_string()
        ),
    )
    .unwrap();
    let out = root.path().join("run");
    let run = args(&[&"run", &cfg, &"-o", &out]);
    refused(
        "caption-id",
        root.path(),
        Some(&out),
        &run,
        &["captions.csv: line 2", "\"../secret\"", "plain file name"],
    );
}

#[test]
fn configs_bounded_above_refuse_before_expanding() {
    let root = tempfile::tempdir().unwrap();
    let axis: Vec<String> = (1..=10).map(|v| v.to_string()).collect();
    let axis = axis.join(", ");
    let keys = ["train.batch_size", "train.epochs", "seed", "train.lr", "data.workers", "train.warmup_steps"];
    let matrix: String = keys.iter().map(|k| format!("\"{k}\" = [{axis}]\n")).collect();
    let path = root.path().join("huge.toml");
    std::fs::write(
        &path,
        format!("name = \"huge\"\n[data]\nsource = \"synthetic\"\n[model]\nplugin = \"builtin:resnet\"\n[matrix]\n{matrix}"),
    )
    .unwrap();
    refused(
        "matrix",
        root.path(),
        None,
        &args(&[&"validate", &path]),
        &["huge.toml", "1000000 cells", "100000"],
    );
    for (name, key) in
        [("prefetch", "prefetch = 1000000000000"), ("shuffle", "shuffle = 4611686018427387904")]
    {
        let path = root.path().join(format!("{name}.toml"));
        std::fs::write(&path, format!("name = \"{name}\"\n[data]\nsource = \"synthetic\"\n{key}\n[model]\nplugin = \"builtin:resnet\"\n"))
            .unwrap();
        refused(name, root.path(), None, &args(&[&"validate", &path]), &[&format!("{name}.toml:4"), "1 to"]);
    }
}
