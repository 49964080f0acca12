//! End-to-end: the data formats users already have. Files written by
//! TensorFlow (tf.io.TFRecordWriter, plain and GZIP) and webdataset's
//! ShardWriter read as the images and labels they hold; files benchkit
//! writes read back in those libraries (where a Python with them is given);
//! one dataset packed as benchkit shards, TFRecord and WebDataset feeds the
//! same samples to the loader at 224 px; damaged records are named or
//! skipped; ILSVRC's own layout (flat val/ with Kaggle's LOC_val_solution.csv
//! or image-net.org's devkit) reads.

use crate::common;

use benchkit::data::{self, Decode, OpenSpec, Record, SourceKind, Split, Streams};
use benchkit_schema::CellResult;
use common::{benchkit, repo};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    repo().join("core/tests/fixtures/interop").join(name)
}

fn open(kind: SourceKind, path: &Path, num_classes: u32) -> data::Dataset {
    try_open(kind, path, Some(num_classes)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn try_open(
    kind: SourceKind,
    path: &Path,
    num_classes: Option<u32>,
) -> Result<data::Dataset, data::DataError> {
    open_with(kind, path, num_classes, Streams::default())
}

fn open_with(
    kind: SourceKind,
    path: &Path,
    num_classes: Option<u32>,
    streams: Streams,
) -> Result<data::Dataset, data::DataError> {
    data::open(&OpenSpec { num_classes, streams, ..OpenSpec::of(kind, path) })
}

/// Each sample of `split`: label, SHA-256 of its pixels decoded to RGB at
/// its own size, their mean, and whether it was a JPEG.
fn decoded(split: &dyn Split) -> Vec<(u32, String, f64, bool)> {
    let mut out: Vec<(u32, String, f64, bool)> = (0..split.len())
        .map(|i| {
            let (record, label) = split.read(i).unwrap_or_else(|e| panic!("{e}"));
            let Record::Encoded(bytes) = record else { panic!("an encoded image") };
            let jpeg = bytes.starts_with(&[0xff, 0xd8]);
            let size = image::load_from_memory(&bytes).unwrap();
            let shape = data::ImageShape { channels: 3, height: size.height(), width: size.width() };
            let mut px = Vec::new();
            Decode { shape, resize: false }.decode(split, i, Record::Encoded(bytes), &mut px).unwrap();
            let mean = px.iter().map(|&v| f64::from(v)).sum::<f64>() / px.len() as f64;
            (label, format!("{:x}", Sha256::digest(&px)), mean, jpeg)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    out
}

/// The expected rows of one split: PNG pixels equal PIL's to the byte; a
/// JPEG's decoders may differ by rounding, so its mean is compared.
fn matches_expected(got: &[(u32, String, f64, bool)], expected: &Value, what: &str) {
    let rows = expected.as_array().unwrap();
    assert_eq!(got.len(), rows.len(), "{what}: sample count");
    let mut pngs: Vec<(u32, String)> = got.iter().filter(|g| !g.3).map(|g| (g.0, g.1.clone())).collect();
    let mut want: Vec<(u32, String)> = rows
        .iter()
        .filter(|r| r["format"] == "png")
        .map(|r| (r["label"].as_u64().unwrap() as u32, r["sha256"].as_str().unwrap().to_string()))
        .collect();
    pngs.sort();
    want.sort();
    assert_eq!(pngs, want, "{what}: PNG labels and pixels");
    let mut jpegs: Vec<(u32, f64)> = got.iter().filter(|g| g.3).map(|g| (g.0, g.2)).collect();
    let mut want: Vec<(u32, f64)> = rows
        .iter()
        .filter(|r| r["format"] == "jpeg")
        .map(|r| (r["label"].as_u64().unwrap() as u32, r["mean"].as_f64().unwrap()))
        .collect();
    jpegs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    want.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(jpegs.len(), want.len(), "{what}: JPEG count");
    for (g, w) in jpegs.iter().zip(&want) {
        assert!(g.0 == w.0 && (g.1 - w.1).abs() < 1.0, "{what}: JPEG label and mean {g:?} vs PIL's {w:?}");
    }
}

#[test]
fn files_the_reference_writers_made_read_as_their_images_and_labels() {
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("expected.json")).unwrap()).unwrap();
    assert_eq!(expected["test"].as_array().unwrap().len(), 4);
    for (dir, kind) in [
        ("tfrecord", SourceKind::Tfrecord),
        ("tfrecord-gzip", SourceKind::Tfrecord),
        ("webdataset", SourceKind::Webdataset),
    ] {
        assert_eq!(SourceKind::detect(&fixture(dir)), Some(kind), "{dir} is recognised");
        let d = open(kind, &fixture(dir), 5);
        assert!(d.train.groups().len() >= 2, "{dir}: one group per file");
        matches_expected(&decoded(d.train.as_ref()), &expected["train"], &format!("{dir} train"));
        matches_expected(&decoded(d.test.as_ref()), &expected["test"], &format!("{dir} test"));
    }
}

/// Export `limit` Fashion-MNIST images of each split as `format` files.
fn export(dir: &Path, format: &str, limit: usize) -> PathBuf {
    let out = dir.join(format!("{format}-folder"));
    benchkit()
        .args(["data", "export"])
        .arg(repo().join("configs/data/fashion-mnist"))
        .arg(&out)
        .args(["--image-format", format, "--limit", &limit.to_string()])
        .assert()
        .success();
    out
}

fn pack(from: &Path, to: &Path, args: &[&str]) -> String {
    let a = benchkit().args(["shards", "pack"]).arg(from).arg(to).args(args).assert().success();
    String::from_utf8_lossy(&a.get_output().stdout).to_string()
}

/// The interop Python (tensorflow-cpu, webdataset, pillow), if given.
fn interop_python() -> Option<PathBuf> {
    match std::env::var_os("BENCHKIT_INTEROP_PYTHON") {
        Some(p) => Some(PathBuf::from(p)),
        None if std::env::var_os("BENCHKIT_REQUIRE_INTEROP").is_some() => {
            panic!("BENCHKIT_REQUIRE_INTEROP is set but BENCHKIT_INTEROP_PYTHON is not")
        }
        None => {
            benchkit::skip::record(
                "set BENCHKIT_INTEROP_PYTHON to a Python with tensorflow-cpu and webdataset (scripts/interop-venv.sh)",
            );
            None
        }
    }
}

#[test]
fn files_benchkit_writes_read_back_in_tensorflow_and_webdataset() {
    let Some(python) = interop_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let png = export(dir.path(), "png", 40);
    for (format, args) in [
        ("tfrecord", vec!["--format", "tfrecord", "--shard-size", "8kB"]),
        ("tfrecord", vec!["--format", "tfrecord", "--gzip", "--shard-size", "8kB"]),
        ("webdataset", vec!["--format", "webdataset", "--shard-size", "8kB"]),
    ] {
        let out = dir.path().join(args.join("_"));
        pack(&png, &out, &args);
        let read = std::process::Command::new(&python)
            .arg(repo().join("scripts/interop.py"))
            .args(["read", format])
            .arg(&out)
            .output()
            .unwrap();
        assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));
        let theirs: Value = serde_json::from_slice(&read.stdout).unwrap();
        let mut theirs: Vec<(u32, String)> = theirs
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["label"].as_u64().unwrap() as u32, r["sha256"].as_str().unwrap().to_string()))
            .collect();
        theirs.sort();
        let kind = if format == "tfrecord" { SourceKind::Tfrecord } else { SourceKind::Webdataset };
        let ours: Vec<(u32, String)> =
            decoded(open(kind, &out, 10).train.as_ref()).into_iter().map(|(l, s, _, _)| (l, s)).collect();
        assert_eq!(theirs.len(), 40, "{args:?}");
        assert_eq!(theirs, ours, "{args:?}: the library reads the labels and pixels benchkit reads");
    }
}

/// Every finished repeat of the run in `out`, from its `summary.json`.
fn repeats(out: &Path) -> Vec<CellResult> {
    common::run_summary(out).repeats
}

/// A loader-only config at ImageNet's input size over `paths` (a matrix when several).
fn loader_config(dir: &Path, name: &str, data: &str, paths: &[&Path]) -> PathBuf {
    let quoted: Vec<String> = paths.iter().map(|p| format!("{:?}", p.display().to_string())).collect();
    let text = format!(
        r#"name = "{name}"
seed = 3
mode = "loader-only"

[data]
path = {first}
num_classes = 10
resize = 224
channels = 3
workers = 2
{data}

[transform]
plugin = "builtin:normalize"
config = {{ mean = [0.286, 0.286, 0.286], std = [0.353, 0.353, 0.353] }}

[model]
plugin = "builtin:resnet"
config = {{ depth = 50 }}

[train]
epochs = 1
batch_size = 256
warmup_steps = 0

[[reporters]]
plugin = "builtin:json"

[matrix]
"data.path" = [{all}]
"#,
        first = quoted[0],
        all = quoted.join(", "),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn one_dataset_in_every_format_feeds_the_same_samples_at_224_px() {
    let dir = tempfile::tempdir().unwrap();
    let jpeg = export(dir.path(), "jpeg", 600);
    let formats = [
        ("bkshard", vec!["--shard-size", "100kB"]),
        ("tfrecord", vec!["--format", "tfrecord", "--shard-size", "100kB"]),
        ("tfrecord-gzip", vec!["--format", "tfrecord", "--gzip", "--shard-size", "100kB"]),
        ("webdataset", vec!["--format", "webdataset", "--shard-size", "100kB"]),
    ];
    let mut dirs = vec![jpeg.clone()];
    for (name, args) in &formats {
        let out = dir.path().join(name);
        let said = pack(&jpeg, &out, args);
        assert!(said.contains("packed 600 train + 600 test records"), "{name}: {said}");
        dirs.push(out);
    }
    // The same samples, label for label and pixel for pixel, in every format.
    let reference = decoded(open(SourceKind::Folder, &jpeg, 10).train.as_ref());
    for (d, kind) in dirs[1..].iter().zip([
        SourceKind::Shards,
        SourceKind::Tfrecord,
        SourceKind::Tfrecord,
        SourceKind::Webdataset,
    ]) {
        assert_eq!(SourceKind::detect(d), Some(kind), "{}", d.display());
        let opened = open(kind, d, 10);
        assert!(opened.train.groups().len() > 2, "{}: several files to interleave", d.display());
        assert_eq!(decoded(opened.train.as_ref()), reference, "{}", d.display());
    }

    let paths: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    let cfg = loader_config(dir.path(), "formats", "shuffle = 64", &paths);
    let out = dir.path().join("run");
    let a = benchkit().args(["run", "-o"]).arg(&out).arg(&cfg).assert().success();
    let table = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    let finished = repeats(&out);
    let sources: Vec<&str> = finished.iter().map(|r| r.loader.source.as_str()).collect();
    assert_eq!(sources, ["folder", "shards", "tfrecord", "tfrecord", "webdataset"], "{table}");
    for r in &finished {
        let l = &r.loader;
        assert_eq!(l.decoded_shape, [3, 224, 224]);
        assert_eq!(l.batches, 2, "600 images in batches of 256, the last partial one dropped: {l:?}");
        assert_eq!(l.skipped, 0);
        assert!(r.images_per_s > 0.0);
    }
}

/// Byte offset of record `k` in a plain TFRecord file.
fn record_offset(bytes: &[u8], k: usize) -> usize {
    let mut at = 0;
    for _ in 0..k {
        at += 16 + u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    }
    at
}

#[test]
fn a_damaged_record_fails_the_run_naming_it_or_is_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let png = export(dir.path(), "png", 300);
    let tf = dir.path().join("tf");
    pack(&png, &tf, &["--format", "tfrecord", "--shard-size", "10MB"]);
    let verify = |classes: &str| {
        benchkit().args(["shards", "verify"]).arg(&tf).args(["--num-classes", classes]).assert()
    };
    let ok = String::from_utf8_lossy(&verify("10").success().get_output().stdout).to_string();
    assert!(ok.contains("ok, 600 tfrecord records in 2 file(s)"), "{ok}");
    let err = String::from_utf8_lossy(&verify("3").failure().get_output().stderr).to_string();
    assert!(
        err.contains("is outside 1..4 (data.num_classes = 3"),
        "labels are checked against the classes: {err}"
    );
    let file = tf.join("train-00000-of-00001");
    let mut bytes = std::fs::read(&file).unwrap();
    let at = record_offset(&bytes, 7);
    bytes[at + 12 + 40] ^= 0x08;
    std::fs::write(&file, &bytes).unwrap();
    let err = String::from_utf8_lossy(&verify("10").failure().get_output().stderr).to_string();
    assert!(err.contains(&format!("at byte {}: record 7: the CRC32C", at + 12)), "{err}");

    // A matrix whose second cell reads the damaged file: that cell fails
    // naming the record, the first cell's measurement is kept.
    let cfg = loader_config(dir.path(), "damaged", "shuffle = \"none\"\ninterleave = 1", &[&png, &tf]);
    let fail = dir.path().join("fail");
    let a = benchkit().args(["run", "-o"]).arg(&fail).arg(&cfg).assert().failure();
    let err = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert!(err.contains(&file.display().to_string()), "{err}");
    assert!(err.contains(&format!("at byte {}", at + 12)) && err.contains("record 7"), "{err}");
    let finished = repeats(&fail);
    let kept: Vec<&CellResult> = finished.iter().filter(|r| r.images_per_s > 0.0).collect();
    assert_eq!(kept.len(), 1, "the PNG cell measured before the damaged one: {finished:?}");
    assert_eq!(kept[0].loader.source, "folder");

    let cfg = loader_config(
        dir.path(),
        "skipped",
        "shuffle = \"none\"\ninterleave = 1\non_corrupt = \"skip\"",
        &[&tf],
    );
    let out = dir.path().join("skip");
    let a = benchkit().args(["run", "-o"]).arg(&out).arg(&cfg).assert().success();
    let table = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert!(table.contains("skipped 1 corrupt sample(s)"), "{table}");
    let loader = repeats(&out).remove(0).loader;
    assert_eq!(loader.skipped, 1);
    assert_eq!(loader.skipped_examples[0], format!("{} (record 7 at byte {at})", file.display()));
    assert!(loader.cut_files.is_empty(), "no file ended early: {loader:?}");

    // A length whose CRC fails ends the file's list: the records after it
    // are never found, so they are no skipped samples; the file is counted
    // as read only up to the fault, with the bytes after it. Record 255:
    // the fault's place is the last of the one whole batch left.
    let cut = record_offset(&bytes, 255);
    bytes[cut + 8] ^= 0x01;
    std::fs::write(&file, &bytes).unwrap();
    let out = dir.path().join("cut");
    let a = benchkit().args(["run", "-o"]).arg(&out).arg(&cfg).assert().success();
    let table = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    let unread = bytes.len() - cut;
    let at = format!("{} (record 255 at byte {cut})", file.display());
    assert!(table.contains("skipped 1 corrupt sample(s)"), "{table}");
    assert!(
        table.contains(&format!(
            "read 1 file(s) only up to a fault; {unread} byte(s) after the faults unread, so their samples are in no count; e.g. {at}"
        )),
        "{table}"
    );
    let loader = repeats(&out).remove(0).loader;
    assert_eq!(loader.skipped, 1, "{loader:?}");
    let cut: Vec<(&str, u64)> = loader.cut_files.iter().map(|c| (c.at.as_str(), c.unread_bytes)).collect();
    assert_eq!(cut, [(at.as_str(), unread as u64)], "{loader:?}");
}

/// ILSVRC 2012 as its archives unpack under `root`: train/<wnid>/*.JPEG for
/// three wnids, 4 images each, and a flat val/ whose
/// ILSVRC2012_val_00000001..12.JPEG are 4 of each wnid in sorted order.
fn ilsvrc_layout(dir: &Path, root: &Path) -> [&'static str; 3] {
    let jpeg = export(dir, "jpeg", 200);
    let wnids = ["n01440764", "n01443537", "n01484850"];
    let mut k = 0;
    for (c, wnid) in wnids.iter().enumerate() {
        std::fs::create_dir_all(root.join("train").join(wnid)).unwrap();
        std::fs::create_dir_all(root.join("val")).unwrap();
        let src = jpeg.join("train").join(c.to_string());
        for (n, f) in std::fs::read_dir(&src).unwrap().take(4).enumerate() {
            let f = f.unwrap().path();
            std::fs::copy(&f, root.join("train").join(wnid).join(format!("{wnid}_{n}.JPEG"))).unwrap();
            k += 1;
            std::fs::copy(&f, root.join("val").join(format!("ILSVRC2012_val_{k:08}.JPEG"))).unwrap();
        }
    }
    wnids
}

fn val_labels(d: &data::Dataset) -> Vec<u32> {
    (0..d.test.len()).map(|i| d.test.read(i).unwrap().1).collect()
}

/// ILSVRC 2012 as Kaggle ships it: ILSVRC/Data/CLS-LOC/{train/<wnid>/*.JPEG,
/// val/*.JPEG} and LOC_val_solution.csv at the top.
#[test]
fn ilsvrc_as_distributed_reads_with_sorted_wnids_as_classes() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().join("imagenet");
    let root = top.join("ILSVRC/Data/CLS-LOC");
    let wnids = ilsvrc_layout(dir.path(), &root);
    let mut solution = String::from("ImageId,PredictionString\n");
    for k in 1..=12 {
        let wnid = wnids[(k - 1) / 4];
        solution.push_str(&format!("ILSVRC2012_val_{k:08},{wnid} 1 2 30 40 {wnid} 5 6 7 8\n"));
    }
    std::fs::write(top.join("LOC_val_solution.csv"), &solution).unwrap();
    // Kaggle's copy also ships the unlabelled test images, flat, beside val/.
    std::fs::create_dir_all(root.join("test")).unwrap();
    std::fs::copy(
        root.join("val/ILSVRC2012_val_00000001.JPEG"),
        root.join("test/ILSVRC2012_test_00000001.JPEG"),
    )
    .unwrap();
    let d = open(SourceKind::Folder, &root, 3);
    assert_eq!(d.classes, wnids);
    assert_eq!((d.train.len(), d.test.len()), (12, 12));
    assert_eq!(val_labels(&d), [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2], "val_00000001..04 are the first wnid's");

    // A val image the table does not list is named.
    std::fs::copy(
        root.join("val/ILSVRC2012_val_00000001.JPEG"),
        root.join("val/ILSVRC2012_val_00000099.JPEG"),
    )
    .unwrap();
    let err = try_open(SourceKind::Folder, &root, None).err().unwrap().to_string();
    assert!(err.contains("ILSVRC2012_val_00000099.JPEG") && err.contains("has no class in"), "{err}");
}

/// The devkit's `.tar.gz` as downloaded, `extra` appended to its ground truth.
fn devkit_archive(to: &Path, extra: &str) {
    let data = repo().join("core/tests/fixtures/devkit/ILSVRC2012_devkit_t12/data");
    let gz = flate2::write::GzEncoder::new(std::fs::File::create(to).unwrap(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let mut add = |name: &str, bytes: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, format!("ILSVRC2012_devkit_t12/{name}"), bytes).unwrap();
    };
    add("COPYING", b"the devkit's licence");
    add("data/meta.mat", &std::fs::read(data.join("meta.mat")).unwrap());
    let truth = std::fs::read_to_string(data.join("ILSVRC2012_validation_ground_truth.txt")).unwrap();
    add("data/ILSVRC2012_validation_ground_truth.txt", format!("{truth}{extra}").as_bytes());
    tar.into_inner().unwrap().finish().unwrap();
}

/// ILSVRC 2012 as image-net.org ships it: the train and val tarballs
/// unpacked, val/ flat, and the devkit (core/tests/fixtures/devkit, written
/// by scipy.io.savemat through scripts/devkit-fixture.py) unpacked or still
/// an archive beside them, as torchvision keeps it. Its meta.mat numbers the
/// wnids in an order that is not sorted, so the labels are only right if
/// they go through it.
#[test]
fn ilsvrc_val_classes_come_from_the_devkit_unpacked_or_archived() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("imagenet");
    let wnids = ilsvrc_layout(dir.path(), &root);
    let fixture = repo().join("core/tests/fixtures/devkit/ILSVRC2012_devkit_t12/data");
    let unpacked = root.join("ILSVRC2012_devkit_t12/data");
    std::fs::create_dir_all(&unpacked).unwrap();
    for f in ["meta.mat", "ILSVRC2012_validation_ground_truth.txt"] {
        std::fs::copy(fixture.join(f), unpacked.join(f)).unwrap();
    }
    let d = open(SourceKind::Folder, &root, 3);
    assert_eq!(d.classes, wnids);
    assert_eq!(val_labels(&d), [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);

    // The archive alone, packed by the binary into ImageNet's TFRecords:
    // each validation record carries its image's class (counted from 1 in
    // the file), image by image.
    // torchvision keeps the downloaded archives beside what they unpack to:
    // they do not make the folder a WebDataset.
    for tar in ["ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar"] {
        std::fs::write(root.join(tar), [0u8; 1024]).unwrap();
    }
    assert_eq!(SourceKind::detect(&root), Some(SourceKind::Folder));
    std::fs::remove_dir_all(root.join("ILSVRC2012_devkit_t12")).unwrap();
    let archive = root.join("ILSVRC2012_devkit_t12.tar.gz");
    devkit_archive(&archive, "");
    let packed = dir.path().join("tfrecords");
    let said = pack(&root, &packed, &["--format", "tfrecord"]);
    assert!(said.contains("packed 12 train + 12 test records"), "{said}");
    let class_of: std::collections::HashMap<String, u32> = (1..=12)
        .map(|k| {
            let bytes = std::fs::read(root.join(format!("val/ILSVRC2012_val_{k:08}.JPEG"))).unwrap();
            (format!("{:x}", Sha256::digest(&bytes)), (k as u32 - 1) / 4)
        })
        .collect();
    let d = open(SourceKind::Tfrecord, &packed, 3);
    assert_eq!(d.test.len(), 12);
    for i in 0..d.test.len() {
        let (Record::Encoded(bytes), label) = d.test.read(i).unwrap() else { panic!("an encoded image") };
        assert_eq!(Some(&label), class_of.get(&format!("{:x}", Sha256::digest(&bytes))), "record {i}");
    }

    // A ground truth line naming an ID meta.mat lacks, through the binary:
    // the member and its line are named, and nothing is packed.
    devkit_archive(&archive, "9\n");
    let a = benchkit().args(["shards", "pack"]).arg(&root).arg(dir.path().join("bad")).assert().failure();
    let err = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert!(
        err.contains("ILSVRC2012_devkit_t12.tar.gz/ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt: line 13: ILSVRC2012_ID 9 is not among"),
        "{err}"
    );
    assert!(!dir.path().join("bad").exists(), "nothing written");

    // The whole ground truth over a subset of ImageNet: line 13 gives a
    // class train/ lacks (ID 4, the parent synset), which is fine until
    // val/ holds that image.
    devkit_archive(&archive, "4\n");
    assert_eq!(val_labels(&open(SourceKind::Folder, &root, 3)), [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
    let first = root.join("val/ILSVRC2012_val_00000001.JPEG");
    std::fs::copy(&first, root.join("val/ILSVRC2012_val_00000013.JPEG")).unwrap();
    let err = try_open(SourceKind::Folder, &root, None).err().unwrap().to_string();
    assert!(
        err.contains("ILSVRC2012_validation_ground_truth.txt: line 13: ILSVRC2012_val_00000013's class n02512053 is not among train/'s 3 class folders"),
        "{err}"
    );
    // An image the ground truth has no line for is named.
    std::fs::rename(
        root.join("val/ILSVRC2012_val_00000013.JPEG"),
        root.join("val/ILSVRC2012_val_00000014.JPEG"),
    )
    .unwrap();
    let err = try_open(SourceKind::Folder, &root, None).err().unwrap().to_string();
    assert!(err.contains("ILSVRC2012_val_00000014.JPEG: has no class in"), "{err}");
    assert!(err.contains("ILSVRC2012_validation_ground_truth.txt"), "{err}");

    // Half an unpacked devkit is named, not passed over for the archive.
    std::fs::create_dir_all(&unpacked).unwrap();
    std::fs::copy(fixture.join("meta.mat"), unpacked.join("meta.mat")).unwrap();
    let err = try_open(SourceKind::Folder, &root, None).err().unwrap().to_string();
    assert!(err.contains("has data/meta.mat but not data/ILSVRC2012_validation_ground_truth.txt"), "{err}");
}

#[test]
fn streamed_sources_need_a_class_count_and_take_their_keys_from_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let tf = fixture("tfrecord");
    let write = |name: &str, data: &str| {
        let text = format!(
            "name = \"{name}\"\nmode = \"loader-only\"\n[data]\npath = {:?}\nsource = \"tfrecord\"\n{data}\n[model]\nplugin = \"builtin:resnet\"\n",
            tf.display().to_string()
        );
        let p = dir.path().join(format!("{name}.toml"));
        std::fs::write(&p, text).unwrap();
        p
    };
    // Each run fails; the one that gets as far as running writes its results in the tempdir.
    let failed = |cfg: &Path| {
        let a = benchkit().current_dir(dir.path()).args(["run"]).arg(cfg).assert().failure();
        String::from_utf8_lossy(&a.get_output().stderr).to_string()
    };
    let err = failed(&write("no-classes", ""));
    assert!(
        err.contains("needs data.num_classes (1000 for ImageNet)") && err.contains("no-classes.toml"),
        "{err}"
    );
    let err =
        failed(&write("bad-pattern", "num_classes = 5\ntrain_files = \"train-{00000..00003-of-00002\""));
    assert!(err.contains("without a `}`") && err.contains("train_files"), "{err}");
    let missing = "num_classes = 5\ntrain_files = \"train-{00000..00002}-of-00002\"\nresize = 16";
    let err = failed(&write("missing", missing));
    assert!(err.contains("train-00002-of-00002"), "{err}");
}

/// Pixel digest → boxes, for every sample of a detection split.
fn boxes_by_image(split: &dyn Split) -> Vec<(String, Vec<[f32; 4]>, Vec<u32>)> {
    let mut out: Vec<(String, Vec<[f32; 4]>, Vec<u32>)> = (0..split.len())
        .map(|i| {
            let (record, _) = split.read(i).unwrap();
            let Record::Encoded(bytes) = record else { panic!("an encoded image") };
            let size = image::load_from_memory(&bytes).unwrap();
            let shape = data::ImageShape { channels: 3, height: size.height(), width: size.width() };
            let mut px = Vec::new();
            Decode { shape, resize: false }.decode(split, i, Record::Encoded(bytes), &mut px).unwrap();
            let boxes = split.boxes(i).expect("detection data has boxes").into_owned();
            (
                format!("{:x}", Sha256::digest(&px)),
                boxes.iter().map(|b| b.corners()).collect(),
                boxes.iter().map(|b| b.label).collect(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn detection_data_packs_into_tfrecord_with_its_boxes_and_an_ssd_trains_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let voc = common::detection_sample(dir.path(), 32, 8, 160);
    let tf = dir.path().join("voc-tfrecord");
    let refused = benchkit()
        .args(["shards", "pack"])
        .arg(&voc)
        .arg(dir.path().join("wds"))
        .args(["--format", "webdataset"])
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&refused.get_output().stderr).to_string();
    assert!(
        err.contains("its boxes would be lost") && err.contains("--format tfrecord, which keeps boxes"),
        "{err}"
    );
    pack(&voc, &tf, &["--format", "tfrecord", "--shard-size", "40kB"]);

    let from_voc = open(SourceKind::Voc, &voc, 10);
    let streams = Streams { boxes_key: Some("image/object/bbox".into()), ..Streams::default() };
    let from_tf = open_with(SourceKind::Tfrecord, &tf, Some(10), streams).unwrap();
    assert!(from_tf.detection);
    let voc_boxes = boxes_by_image(from_voc.train.as_ref());
    assert!(voc_boxes.iter().map(|b| b.1.len()).sum::<usize>() > 32, "the sample has objects");
    assert_eq!(boxes_by_image(from_tf.train.as_ref()), voc_boxes, "the same boxes on the same images");

    let cfg = dir.path().join("ssd.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"name = "ssd-tfrecord"
seed = 5
[data]
source = "tfrecord"
path = {:?}
num_classes = 10
boxes_key = "image/object/bbox"
resize = [160, 160]
[transform]
plugin = "builtin:ssd-augment"
[model]
plugin = "builtin:ssd"
config = {{ backbone = "resnet", depth = 18, width = 0.25, size = 160 }}
[train]
epochs = 1
batch_size = 16
warmup_steps = 0
max_steps_per_epoch = 2
[[reporters]]
plugin = "builtin:json"
"#,
            tf.display().to_string()
        ),
    )
    .unwrap();
    let out = dir.path().join("ssd");
    let a = benchkit().args(["run", "-o"]).arg(&out).arg(&cfg).assert();
    let stdout = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    a.success();
    let repeat = repeats(&out).remove(0);
    assert_eq!(repeat.accuracy_metric, "mAP@0.5", "{stdout}");
    assert!((0.0..=1.0).contains(&repeat.final_test_accuracy), "{repeat:?}");
}
