//! End-to-end: matrices run by the real binary, one process per cell, on
//! the shipped Fashion-MNIST subset: failing and timed-out cells, a killed
//! run, resume, and `compare` exit codes.

use crate::common;

use benchkit_schema::{CellRecord, CellStatus};
use common::{benchkit, cache, record, repo, small_config, status};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A small, fast config in `dir` with `extra` top-level keys and `matrix` appended.
fn config(dir: &Path, extra: &str, train: &str, matrix: &str) -> PathBuf {
    let data = format!(
        "path = {:?}\ntrain_limit = 256\ntest_limit = 100",
        repo().join("configs/data/fashion-mnist").display().to_string()
    );
    let tail = format!("[[reporters]]\nplugin = \"builtin:csv\"\n\n{matrix}");
    small_config(dir, "grid", extra, &data, train, &tail)
}

fn read(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn events(dir: &Path, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == kind)
        .collect()
}

#[test]
fn a_failing_cell_is_a_row_and_the_others_still_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "repeats = 2", "", "[matrix]\n\"model.config.depth\" = [99, 18]\n");
    let out = dir.path().join("out");
    let assert = benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().failure();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stdout.contains("resnet-99") && stdout.contains("FAILED"), "{stdout}");
    assert!(
        stdout.contains("resnet-99 ×0.125: failed: plugin builtin:resnet"),
        "the reason is shown: {stdout}"
    );
    assert!(stderr.contains("1 of 2 cell(s) failed"), "{stderr}");

    let failed = record(&out.join("cells/000-depth=99.json"));
    assert_eq!(status(&failed), CellStatus::Failed);
    assert!(failed.failures[0].reason.contains("expected 18, 34, 50, 101 or 152, got 99"));
    assert_eq!(failed.repeats.len(), 0, "a deterministic failure is not repeated");
    let ok = record(&out.join("cells/001-depth=18.json"));
    assert_eq!(status(&ok), CellStatus::Ok);
    assert_eq!(ok.repeats.len(), 2, "both repeats of the good cell ran");
    assert_eq!(ok.summary.as_ref().and_then(|s| s.images_per_s).map(|x| x.n), Some(2));

    let csv = std::fs::read_to_string(out.join("cells.csv")).unwrap();
    assert!(csv.starts_with("cell,label,model.config.depth,status,repeats"), "{csv}");
    assert!(csv.contains("depth=99,resnet-99 ×0.125,99,failed,0"), "{csv}");
    assert_eq!(events(&out, "cell-failed").len(), 1);
    assert_eq!(events(&out, "cell").len(), 2);
}

#[test]
fn a_cell_past_its_time_limit_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let matrix = "[matrix]\n\"train.epochs\" = [50]\n";
    let cfg = config(dir.path(), "cell_timeout_s = 0.5", "", matrix);
    let out = dir.path().join("out");
    let started = Instant::now();
    let assert = benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().failure();
    assert!(started.elapsed() < Duration::from_secs(60), "stopped, not trained to the end");
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(stdout.contains("stopped at the cell time limit (cell_timeout_s = 0.5)"), "{stdout}");
    let cell = record(&out.join("cells/000-epochs=50.json"));
    assert_eq!(status(&cell), CellStatus::Failed);
}

#[test]
fn a_killed_run_keeps_its_cells_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "", "", "[matrix]\n\"train.batch_size\" = [16, 32, 64]\n");
    let out = dir.path().join("out");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("benchkit"))
        .env("BENCHKIT_CACHE_DIR", cache())
        .args(["run", "-q", "-o"])
        .arg(&out)
        .arg(&cfg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let first = out.join("cells/000-batch_size=16.json");
    // A record is written after each repeat and again with its summary:
    // the cell is finished once the summary is in (records are replaced
    // whole, so a read never sees half of one).
    let finished = |path: &Path| path.exists() && record(path).summary.is_some();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !finished(&first) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = record(&first);
    assert_eq!(status(&kept), CellStatus::Ok, "a finished cell is whole after the kill");
    let ran_before = events(&out, "cell-start").len();

    let assert = benchkit().arg("run").arg("--resume").arg(&out).assert().success();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("1 of 3 cell(s) already finished"), "{stderr}");
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    for label in ["batch 16", "batch 32", "batch 64"] {
        assert!(stdout.contains(label), "{stdout}");
    }
    let started: Vec<String> = events(&out, "cell-start")
        .iter()
        .skip(ran_before)
        .map(|e| e["cell"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !started.contains(&"batch_size=16".to_string()),
        "the finished cell is not run again: {started:?}"
    );
    let as_json = |r: &CellRecord| serde_json::to_value(&r.repeats).unwrap();
    assert_eq!(as_json(&record(&first)), as_json(&kept), "and its record is untouched");
    let summary = read(&out.join("summary.json"));
    assert_eq!(summary["summaries"].as_array().unwrap().len(), 3, "reports cover every cell");

    // Nothing left to do: a second resume runs no cell.
    let before = events(&out, "cell-start").len();
    benchkit().arg("run").arg("--resume").arg(&out).assert().success();
    assert_eq!(events(&out, "cell-start").len(), before);

    // compare: a run against itself passes; a copy made twice as slow fails with status 3.
    let same = benchkit().args(["compare"]).arg(&out).arg(&out).assert().success();
    assert!(String::from_utf8_lossy(&same.get_output().stdout).contains("0 regression(s)"));
    let slow = dir.path().join("slow");
    std::fs::create_dir_all(slow.join("cells")).unwrap();
    std::fs::copy(out.join("run.json"), slow.join("run.json")).unwrap();
    for entry in std::fs::read_dir(out.join("cells")).unwrap() {
        let path = entry.unwrap().path();
        let mut slower = record(&path);
        for repeat in &mut slower.repeats {
            repeat.images_per_s *= 0.5;
        }
        if let Some(speed) = slower.summary.as_mut().and_then(|s| s.images_per_s.as_mut()) {
            speed.median *= 0.5;
        }
        let text = serde_json::to_string(&slower).unwrap();
        std::fs::write(slow.join("cells").join(path.file_name().unwrap()), text).unwrap();
    }
    let regressed = benchkit().args(["compare", "--threshold", "5%"]).arg(&out).arg(&slow).assert().code(3);
    let table = String::from_utf8_lossy(&regressed.get_output().stdout).into_owned();
    assert!(
        table.contains("0.500×") && table.contains("REGRESSION") && table.contains("3 regression(s)"),
        "{table}"
    );
    // The other way round it is faster, which never fails the gate.
    benchkit().args(["compare"]).arg(&slow).arg(&out).assert().success();
}

#[test]
fn matrix_errors_name_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "", "", "[matrix]\n\"train.batch_size\" = [32, 0]\n");
    let assert = benchkit().arg("run").arg(&cfg).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    // The line and column of the value 0 itself, inside the matrix.
    assert!(
        stderr.contains(
            "grid.toml:32:27: `matrix.train.batch_size`: in cell batch_size=0: expected a batch size of at least 1"
        ),
        "{stderr}"
    );
}

#[test]
fn validate_checks_every_cell_and_names_the_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "", "", "[matrix]\n\"model.config.depth\" = [18, 99]\n");
    let assert = benchkit().arg("validate").arg(&cfg).assert().failure();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stdout.contains("cell depth=18") && !stdout.contains(": ok"), "{stdout}");
    assert!(stderr.contains("error: cell depth=99: plugin builtin:resnet"), "{stderr}");
}

/// A cell whose backend this build lacks (`cuda`) is listed `not
/// available` with what is missing and how to get it; the other cells
/// train and the run succeeds. A config with no cell that can run is
/// refused at its line.
#[test]
#[cfg_attr(feature = "cuda", ignore = "needs a build without `cuda`")]
fn a_cell_this_build_cannot_train_is_listed_and_the_others_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "", "", "[matrix]\nbackend = [\"cuda\", \"flex\"]\n");
    let out = dir.path().join("out");
    let assert = benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let lacking = "cuda: not available: backend \"cuda\" needs benchkit built with `--features cuda`";
    assert!(stdout.contains(lacking), "a note under the table: {stdout}");
    assert!(stdout.contains("not available") && stdout.contains("scripts/gpu-bundle.sh"), "{stdout}");
    let summary = common::run_summary(&out);
    let statuses: Vec<CellStatus> = summary.summaries.iter().map(|s| s.status).collect();
    assert_eq!(statuses, [CellStatus::Unavailable, CellStatus::Ok]);
    assert!(summary.summaries[0].reason.as_deref().is_some_and(|r| r.contains("--features cuda")));
    assert_eq!(summary.end.as_ref().map(|e| (e.failed, e.unavailable)), Some((0, 1)));
    assert_eq!(events(&out, "cell-start").len(), 1, "only the flex cell trained");
    // A resume asks again what this build lacks (a build with it would train the cell).
    let resumed = benchkit().arg("run").arg("--resume").arg(&out).assert().success();
    let said = String::from_utf8_lossy(&resumed.get_output().stderr).into_owned();
    assert!(
        said.contains("1 of 2 cell(s) already finished") && said.contains("backend=cuda: not available"),
        "{said}"
    );
    assert_eq!(events(&out, "cell-start").len(), 1, "the finished cell is not run again");

    let validated = benchkit().arg("validate").arg(&cfg).assert().success();
    let said = String::from_utf8_lossy(&validated.get_output().stdout).into_owned();
    assert!(said.contains("cell backend=cuda\n  not available: backend \"cuda\""), "{said}");
    assert!(said.contains("ok, 2 cell(s), 1 of them not available here"), "{said}");

    let alone = tempfile::tempdir().unwrap();
    let cfg = config(alone.path(), "", "", "[matrix]\nbackend = [\"cuda\"]\n");
    let refused = benchkit().arg("validate").arg(&cfg).assert().code(1);
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(
        stderr.contains("grid.toml:") && stderr.contains("in cell backend=cuda: backend \"cuda\" needs"),
        "{stderr}"
    );
}
