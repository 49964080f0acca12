//! The promises made under results schema 1.x, kept by schema 2: results
//! directories benchkit 1.x wrote (a real run and its two slices, kept in
//! `fixtures/results-1.4.0`) still report, compare and merge; a reporter
//! built for plugin contract 1.0 still runs and receives 1.x's names; the
//! old config key, options and command are refused, each naming its new
//! name.

use crate::common::{self, benchkit};
use benchkit_schema::{v1, CellRecord, Event, Stamped};
use std::path::{Path, PathBuf};

/// A copy of the 1.4.0 fixture `part` (`whole`, `slice-0`, `slice-1`) under `root`.
fn v1_copy(root: &Path, part: &str) -> PathBuf {
    let from = common::repo().join("core/tests/fixtures/results-1.4.0").join(part);
    let to = root.join(part);
    copy_dir(&from, &to);
    to
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

fn stdout(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

fn stderr(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

/// The 1.x cell records of `dir`, read as `report` reads them: in 2.0's names.
fn v1_records(dir: &Path) -> Vec<CellRecord> {
    benchkit::runner::load_cells(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

#[test]
fn a_1x_run_is_read_in_2_0_names_reported_and_compared_but_not_resumed() {
    let root = tempfile::tempdir().unwrap();
    let old = v1_copy(root.path(), "whole");
    let cells = v1_records(&old);
    assert_eq!(cells.len(), 2);
    let two = &cells[1];
    assert_eq!((two.cell.as_str(), two.repeats_asked, two.repeats.len()), ("processes=2", 2, 2));
    let parallel = &two.repeats[0].parallel;
    assert_eq!(
        (parallel.replicas, parallel.batch_per_replica),
        (2, 32),
        "1.x's workers and per_worker_batch"
    );
    assert!(parallel.exposed_communication_pct > 0.0, "1.x's all_reduce_pct: {parallel:?}");
    assert_eq!(parallel.ranks.len(), 2);
    assert!(parallel.ranks.iter().all(|r| r.exposed_communication_pct.is_finite()));
    let summary = two.summary.as_ref().expect("a finished cell");
    assert_eq!(summary.replicas, Some(2));
    assert!(summary.exposed_communication_pct.is_some());

    let report = benchkit().arg("report").arg(&old).assert().success();
    let table = stdout(&report);
    assert!(table.contains("replicas") && table.contains("exposed comm."), "{table}");
    let row = table.lines().find(|l| l.starts_with("processes=2")).unwrap_or_else(|| panic!("{table}"));
    let at = table.lines().next().and_then(|h| h.find("weak %")).unwrap_or_else(|| panic!("{table}"));
    let weak: f64 = row[at..].split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(-1.0);
    assert!(row.contains(" 2 ") && weak > 0.0, "2 replicas, weak scaling: {row}");
    let log = std::fs::read_to_string(old.join("events.jsonl")).unwrap();
    assert!(log.contains("\"schema\":\"1.4.0\""), "report leaves the 1.x log as it was");

    // The same config under 2.0 (its one renamed key written anew), against the 1.x run.
    let config =
        std::fs::read_to_string(common::repo().join("core/tests/fixtures/results-1.4.0/config.toml"))
            .unwrap()
            .replace("batch_per_worker", "batch_per_replica");
    std::fs::write(root.path().join("now.toml"), config).unwrap();
    let now = root.path().join("now");
    benchkit()
        .arg("run")
        .arg(root.path().join("now.toml"))
        .arg("--output")
        .arg(&now)
        .arg("-q")
        .assert()
        .success();
    let compared =
        benchkit().arg("compare").arg(&old).arg(&now).args(["--threshold", "99%"]).assert().success();
    let text = stdout(&compared);
    assert!(text.contains("processes=1") && text.contains("processes=2"), "{text}");

    let refused = benchkit().args(["run", "--resume"]).arg(&old).assert().failure();
    let err = stderr(&refused);
    assert!(err.contains("results schema 1.4.0") && err.contains("not resume"), "{err}");
}

#[test]
fn slices_written_by_1x_merge_into_a_2_0_run() {
    let root = tempfile::tempdir().unwrap();
    let slices = [v1_copy(root.path(), "slice-0"), v1_copy(root.path(), "slice-1")];
    let merged = root.path().join("merged");
    benchkit().arg("merge").arg(&merged).args(&slices).assert().success();
    let cells = common::records(&merged);
    assert_eq!(cells.iter().map(|c| c.cell.as_str()).collect::<Vec<_>>(), ["processes=1", "processes=2"]);
    for (cell, slice) in cells.iter().zip(&slices) {
        let from = &v1_records(slice)[0];
        assert_eq!(cell.repeats.len(), 2, "{}", cell.cell);
        let speeds = |r: &CellRecord| r.repeats.iter().map(|x| x.images_per_s).collect::<Vec<_>>();
        assert_eq!(speeds(cell), speeds(from), "{}: the slice's repeats, kept", cell.cell);
    }
    let weak =
        cells[1].summary.as_ref().and_then(|s| s.weak_scaling.as_ref()).expect("scaled anew over both");
    assert_eq!((weak.replicas, weak.baseline_cell.as_str()), (2, "processes=1"));
    let log = std::fs::read_to_string(merged.join("events.jsonl")).unwrap();
    let events = benchkit_schema::read_events(&log).unwrap();
    assert!(
        matches!(&events[0].event, Event::RunStart(s) if s.schema == benchkit_schema::SCHEMA_VERSION),
        "the merged run is of this schema"
    );
    benchkit().arg("report").arg(&merged).assert().success();
}

#[test]
fn a_reporter_of_contract_1_0_receives_every_event_in_1x_names() {
    let root = tempfile::tempdir().unwrap();
    let config =
        std::fs::read_to_string(common::repo().join("core/tests/fixtures/results-1.4.0/config.toml"))
            .unwrap()
            .replace("batch_per_worker", "batch_per_replica")
            .replace("repeats = 2", "repeats = 1")
            + &format!(
                "\n[[reporters]]\nplugin = {:?}\n",
                common::fixture("contract_1_0").display().to_string()
            );
    let path = root.path().join("c.toml");
    std::fs::write(&path, config).unwrap();
    let out = root.path().join("out");
    benchkit().arg("run").arg(&path).arg("--output").arg(&out).arg("-q").assert().success();

    let written = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    let received = std::fs::read_to_string(out.join("received.jsonl")).unwrap();
    let written: Vec<&str> = written.lines().collect();
    let received: Vec<&str> = received.lines().collect();
    assert_eq!(received.len(), written.len(), "every event, once");
    for (mine, theirs) in written.iter().zip(&received) {
        for new in ["\"replicas\"", "exposed_communication", "batch_per_replica", "per_replica"] {
            assert!(!theirs.contains(new), "a 1.0 reporter got {new}: {theirs}");
        }
        // What it received reads back, through 1.x's names, as what was written.
        let mut value: serde_json::Value = serde_json::from_str(theirs).unwrap();
        v1::upgrade(v1::Document::Event, &mut value);
        // 1.x named no phase: theirs hold the positional `ms` alone.
        let mut mine: serde_json::Value = serde_json::from_str(mine).unwrap();
        benchkit_schema::phases::unname(&mut mine);
        assert_eq!(value, mine);
        serde_json::from_value::<Stamped>(value).expect("an event of this schema");
    }
    let cell =
        received.iter().find(|l| l.contains("\"event\":\"cell\"") && l.contains("processes=2")).unwrap();
    let cell: serde_json::Value = serde_json::from_str(cell).unwrap();
    assert_eq!(cell["parallel"]["workers"], 2, "{cell}");
    assert!(cell["parallel"]["all_reduce_ms"]["p50"].is_number(), "{cell}");
    assert!(received[0].contains("\"schema\":\"1.4.0\""), "{}", received[0]);
}

#[test]
fn old_names_are_refused_naming_the_new_ones() {
    let old = common::repo().join("core/tests/fixtures/results-1.4.0/config.toml");
    let err = stderr(&benchkit().arg("validate").arg(&old).assert().failure());
    assert!(err.contains("config.toml:20:") && err.contains("write `train.batch_per_replica`"), "{err}");

    for (args, new) in [
        (vec!["run", "x.toml", "--shard", "0/2"], "--slice"),
        (vec!["predict", "results", "--nodes", "2"], "--machines"),
        (vec!["predict", "results", "--gpus-per-node", "8"], "--gpus-per-machine"),
        (vec!["plugins"], "benchkit plugin list"),
    ] {
        let out = benchkit().args(&args).assert().failure().code(2);
        let err = stderr(&out);
        assert!(err.contains("was renamed") && err.contains(new), "{args:?}: {err}");
    }
}
