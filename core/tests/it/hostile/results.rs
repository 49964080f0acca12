//! Results directories written elsewhere, through the binary and the
//! library's reader: names that leave the directory, a slice count of 0,
//! devices and FIFOs, logs linked elsewhere or cut off mid-line, damaged
//! copies of every file, and a merge or report killed while reading.

use super::common::{benchkit, cache};
use super::inputs::{args, edit_json, listing, refused};
use serde_json::{json, Value};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A `--mock` run of two cells in `root/<name>` (a slice of it with `slice`).
fn mock_run(root: &Path, name: &str, slice: Option<&str>) -> PathBuf {
    let cfg = super::common::small_config(
        root,
        "sweep",
        "",
        "source = \"synthetic\"\nshape = [1, 28, 28]\nnum_classes = 10",
        "",
        "[matrix]\n\"train.batch_size\" = [16, 32]\n",
    );
    let dir = root.join(name);
    let mut run = benchkit();
    run.arg("run").arg(&cfg).arg("-o").arg(&dir).arg("--mock");
    if let Some(slice) = slice {
        run.args(["--slice", slice]);
    }
    run.assert().success();
    dir
}

fn edit_run(dir: &Path, edit: impl FnOnce(&mut Value)) {
    edit_json(dir, "run.json", edit);
}

fn cell_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir.join("cells")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

#[test]
fn results_directories_edited_elsewhere_are_refused_or_repaired() {
    let root = tempfile::tempdir().unwrap();
    let base = mock_run(root.path(), "base", None);
    let copy = |name: &str| {
        let to = root.path().join(name);
        Command::new("cp").arg("-a").arg(&base).arg(&to).status().unwrap();
        to
    };
    let resume = |dir: &Path| args(&[&"run", &"--resume", &dir, &"--mock"]);

    // A cell's file name that leaves the directory, and two cells given one.
    let escape = copy("escape");
    std::fs::remove_file(&cell_files(&escape)[0]).unwrap();
    edit_run(&escape, |r| r["cells"][0]["slug"] = json!("../../escaped"));
    refused(
        "resume-escape",
        root.path(),
        None,
        &resume(&escape),
        &["run.json", "\"../../escaped\"", "altered"],
    );
    let twice = copy("twice");
    edit_run(&twice, |r| r["cells"][1]["slug"] = r["cells"][0]["slug"].clone());
    refused("resume-twice", root.path(), None, &resume(&twice), &["run.json", "one cell each"]);
    refused("report-twice", root.path(), None, &args(&[&"report", &twice]), &["run.json", "one cell each"]);

    // A slice of count 0 (merge divided by it).
    let slices =
        [mock_run(root.path(), "slice-0", Some("0/2")), mock_run(root.path(), "slice-1", Some("1/2"))];
    for dir in &slices {
        edit_run(dir, |r| r["slice"]["count"] = json!(0));
    }
    let merged = root.path().join("merged");
    let merge = args(&[&"merge", &merged, &slices[0], &slices[1]]);
    refused("merge-count-0", root.path(), Some(&merged), &merge, &["slice is 0 of 0", "count of at least 1"]);

    // Files that are devices or FIFOs, read without end or blocking.
    let device = copy("device");
    std::fs::remove_file(device.join("run.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", device.join("run.json")).unwrap();
    refused(
        "report-device",
        root.path(),
        None,
        &args(&[&"report", &device]),
        &["run.json", "character device"],
    );
    let fifo = copy("fifo");
    std::fs::remove_file(fifo.join("events.jsonl")).unwrap();
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        fifo.join("events.jsonl"),
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
    )
    .unwrap();
    refused("report-fifo", root.path(), None, &args(&[&"report", &fifo]), &["events.jsonl", "FIFO"]);
    let cell = copy("cell-device");
    let first = cell_files(&cell)[0].clone();
    std::fs::remove_file(&first).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &first).unwrap();
    refused("compare-device", root.path(), None, &args(&[&"compare", &base, &cell]), &["character device"]);

    // An event log linked to a file elsewhere is never appended to.
    let linked = copy("linked");
    let elsewhere = root.path().join("elsewhere.jsonl");
    std::fs::rename(linked.join("events.jsonl"), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, linked.join("events.jsonl")).unwrap();
    std::fs::remove_file(&cell_files(&linked)[1]).unwrap();
    let before = std::fs::read(&elsewhere).unwrap();
    refused("resume-linked-log", root.path(), None, &resume(&linked), &["events.jsonl", "plain file"]);
    assert_eq!(std::fs::read(&elsewhere).unwrap(), before, "the linked file was written");

    // A log cut off mid-line: resumed on a fresh line, then read whole.
    let torn = copy("torn");
    let log = std::fs::read(torn.join("events.jsonl")).unwrap();
    std::fs::write(torn.join("events.jsonl"), &log[..log.len() - 40]).unwrap();
    std::fs::remove_file(&cell_files(&torn)[1]).unwrap();
    benchkit().args(["run", "--resume"]).arg(&torn).arg("--mock").assert().success();
    benchkit().arg("report").arg(&torn).assert().success();
    let text = std::fs::read_to_string(torn.join("events.jsonl")).unwrap();
    let events = benchkit_schema::read_events(&text).unwrap();
    assert_eq!(events.iter().filter(|e| matches!(e.event, benchkit_schema::Event::RunStart(_))).count(), 2);
    assert_eq!(cell_files(&torn).len(), 2);
}

/// `cases` damaged copies of `valid`: a byte overwritten or a stretch cut
/// out, at seeded random places (the same every run).
fn damaged(valid: &[u8], cases: usize, mut state: u64) -> Vec<Vec<u8>> {
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as usize
    };
    (0..cases)
        .map(|_| {
            let mut bytes = valid.to_vec();
            let at = next() % (bytes.len() + 1);
            match next() % 3 {
                0 if at < bytes.len() => bytes[at] = next() as u8,
                1 => bytes.truncate(at),
                _ => drop(bytes.drain(at..(at + next() % 64).min(bytes.len()))),
            }
            bytes
        })
        .collect()
}

#[test]
fn damaged_results_files_are_read_without_a_panic() {
    let root = tempfile::tempdir().unwrap();
    let dir = mock_run(root.path(), "run", None);
    let files = [dir.join("run.json"), dir.join("events.jsonl"), cell_files(&dir)[0].clone()];
    for (k, file) in files.iter().enumerate() {
        let valid = std::fs::read(file).unwrap();
        for bytes in damaged(&valid, 150, 0x9E37_79B9 + k as u64) {
            std::fs::write(file, &bytes).unwrap();
            // Errors are the point; a panic fails the test.
            let _ = benchkit::runner::read_run(&dir);
            let _ = benchkit::runner::load_run_cells(&dir);
            let _ = benchkit_schema::read_events(&String::from_utf8_lossy(&bytes));
        }
        std::fs::write(file, &valid).unwrap();
    }
}

/// Every file under `dir` with its bytes.
fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut all: Vec<(PathBuf, Vec<u8>)> = listing(dir)
        .into_iter()
        .filter(|p| dir.join(p).is_file())
        .map(|p| (p.clone(), std::fs::read(dir.join(&p)).unwrap()))
        .collect();
    all.sort();
    all
}

#[test]
fn a_killed_merge_or_report_leaves_what_it_read_untouched() {
    let root = tempfile::tempdir().unwrap();
    let slices =
        [mock_run(root.path(), "slice-0", Some("0/2")), mock_run(root.path(), "slice-1", Some("1/2"))];
    // `report` renders into the directory it reads: render once, then the files are its own.
    benchkit().arg("report").arg(&slices[0]).assert().success();
    let before: Vec<_> = slices.iter().map(|s| contents(s)).collect();
    let binary = assert_cmd::cargo::cargo_bin("benchkit");
    for (k, delay_ms) in [0u64, 5, 20, 60, 150].into_iter().enumerate() {
        let merged = root.path().join(format!("merged-{k}"));
        for command in [
            vec![OsString::from("merge"), merged.into(), slices[0].clone().into(), slices[1].clone().into()],
            vec![OsString::from("report"), slices[0].clone().into()],
        ] {
            let mut child = Command::new(&binary)
                .args(&command)
                .env("BENCHKIT_CACHE_DIR", cache())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(delay_ms));
            let _ = child.kill();
            let _ = child.wait();
            // Every file it read is as it was; a kill may leave only a
            // temporary file of `report`'s own output, never rename it in.
            for (slice, was) in slices.iter().zip(&before) {
                let now = contents(slice);
                let kept: Vec<_> =
                    now.iter().filter(|(p, _)| was.iter().any(|(q, _)| q == p)).cloned().collect();
                assert!(&kept == was, "{command:?} killed after {delay_ms} ms changed {}", slice.display());
                let new: Vec<_> =
                    now.iter().filter(|(p, _)| !was.iter().any(|(q, _)| q == p)).map(|(p, _)| p).collect();
                assert!(new.iter().all(|p| p.to_string_lossy().contains(".tmp")), "{command:?}: {new:?}");
            }
        }
    }
}
