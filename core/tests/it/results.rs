//! The results as the real binary writes and reads them, through the mock
//! executor (`run --mock`: no training, figures that depend only on the
//! cell, a clock that never moves): the terminal table as a snapshot, a run
//! killed part-way and resumed rendering every built-in reporter's files
//! exactly as an uninterrupted run does, `benchkit report` re-rendering a
//! run from its events, and results of another schema refused.

use crate::common;

use benchkit_schema::{CellRecord, CellStatus, CellSummary, FailureKind};
use common::benchkit;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const REPORTERS: [&str; 5] = ["json", "csv", "markdown", "html", "mllog"];

/// A 2×2 matrix on synthetic data, three repeats, every built-in reporter.
fn config(dir: &Path) -> PathBuf {
    let reporters: String =
        REPORTERS.iter().map(|r| format!("[[reporters]]\nplugin = \"builtin:{r}\"\n")).collect();
    let text = format!(
        r#"name = "mock"
seed = 1
repeats = 3

[data]
source = "synthetic"
shape = [1, 28, 28]
num_classes = 10

[transform]
plugin = "builtin:normalize"

[model]
plugin = "builtin:resnet"
config = {{ depth = 18, width = 0.125 }}

[train]
epochs = 2
batch_size = 32
lr = 0.1
target_accuracy = 0.7

[matrix]
"train.batch_size" = [32, 64]
"model.config.width" = [0.125, 0.25]

{reporters}"#
    );
    let path = dir.join("mock.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The failing cell of every mock run here.
const FAILS: &str = "batch_size=64,width=0.25";

fn mock(args: &[&std::ffi::OsStr], stop_after: Option<usize>) -> assert_cmd::assert::Assert {
    let mut cmd = benchkit();
    cmd.arg("run").args(args).arg("--mock").arg("--quiet").env("BENCHKIT_MOCK_FAIL", FAILS);
    if let Some(n) = stop_after {
        cmd.env("BENCHKIT_MOCK_STOP_AFTER", n.to_string());
    }
    cmd.assert()
}

/// Every reporter file in `dir`: name -> contents.
fn artifacts(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !["run.json", "events.jsonl"].contains(&n.as_str()))
        .map(|n| (n.clone(), std::fs::read_to_string(dir.join(&n)).unwrap()))
        .collect()
}

fn stdout(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

/// The table: stdout before the lines saying where the results went.
fn table(out: &str) -> String {
    let lines = out.lines().take_while(|l| !l.starts_with("results in ") && !l.starts_with("wrote "));
    lines.map(|l| format!("{l}\n")).collect()
}

#[test]
fn the_terminal_table_is_stable() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let out = dir.path().join("run");
    let assert = mock(&[cfg.as_os_str(), "--output".as_ref(), out.as_os_str()], None).failure();
    let text = stdout(&assert);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("1 of 4 cell(s) failed"), "{stderr}");
    insta::assert_snapshot!("mock_table", table(&text));
}

#[test]
fn a_resumed_run_reports_like_an_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let whole = dir.path().join("whole");
    mock(&[cfg.as_os_str(), "--output".as_ref(), whole.as_os_str()], None).failure();

    // Killed at the start of its fifth attempt: the first cell done, the
    // second with one repeat kept.
    let cut = dir.path().join("cut");
    let killed = mock(&[cfg.as_os_str(), "--output".as_ref(), cut.as_os_str()], Some(4)).failure();
    assert_eq!(killed.get_output().status.code(), Some(137));
    assert!(artifacts(&cut).is_empty(), "a killed run wrote no report");
    let resumed = mock(&["--resume".as_ref(), cut.as_os_str()], None).failure();

    let (a, b) = (artifacts(&whole), artifacts(&cut));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    assert_eq!(a.keys().filter(|n| n.starts_with("mllog-")).count(), 12, "eleven repeats and a failure");
    for (name, text) in &a {
        if name == "summary.json" {
            // The run header says how many cells the resumed run found done.
            let resumed: serde_json::Value = serde_json::from_str(&b[name]).unwrap();
            assert_eq!(resumed["run"]["resumed_cells"], 1);
            let mut resumed = resumed;
            resumed["run"]["resumed_cells"] = 0.into();
            assert_eq!(serde_json::from_str::<serde_json::Value>(text).unwrap(), resumed);
        } else {
            assert_eq!(text, &b[name], "{name} differs after resuming");
        }
    }
    assert_eq!(
        table(&stdout(&resumed)),
        table(&stdout(&mock(&["--resume".as_ref(), whole.as_os_str()], None)))
    );
}

/// The `cell-start` events of the run in `dir`, as `(cell, repeat)` in order.
fn starts(dir: &Path) -> Vec<(String, u64)> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["event"] == "cell-start")
        .map(|e| (e["cell"].as_str().unwrap_or_default().to_string(), e["repeat"].as_u64().unwrap_or(0)))
        .collect()
}

#[test]
fn interleaved_repeats_run_round_by_round_and_summarise_as_each_cell_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let plain = dir.path().join("plain");
    mock(&[cfg.as_os_str(), "--output".as_ref(), plain.as_os_str()], None).failure();
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("repeats = 3", "repeats = 3\ninterleave_repeats = true");
    std::fs::write(&cfg, text).unwrap();
    let rounds = dir.path().join("rounds");
    mock(&[cfg.as_os_str(), "--output".as_ref(), rounds.as_os_str()], None).failure();
    // Every cell's first repeat, then every cell's second, then every
    // cell's third (where the failing cell fails, as it does at once).
    let order: Vec<String> = starts(&rounds).iter().map(|(c, r)| format!("{c}#{r}")).collect();
    let cells = ["batch_size=32,width=0.125", "batch_size=32,width=0.25", "batch_size=64,width=0.125", FAILS];
    let want: Vec<String> = (1..=3).flat_map(|r| cells.iter().map(move |c| format!("{c}#{r}"))).collect();
    assert_eq!(order, want);
    assert_eq!(
        starts(&plain).iter().filter(|(c, _)| c == FAILS).count(),
        3,
        "it fails at its third at once too"
    );
    // The same cells, repeats and figures as each cell's repeats at once.
    let (a, b) = (common::run_summary(&plain), common::run_summary(&rounds));
    assert_eq!(serde_json::to_value(&a.summaries).unwrap(), serde_json::to_value(&b.summaries).unwrap());

    // Killed in its second round and resumed: the same as uninterrupted.
    let cut = dir.path().join("cut");
    mock(&[cfg.as_os_str(), "--output".as_ref(), cut.as_os_str()], Some(5)).failure();
    mock(&["--resume".as_ref(), cut.as_os_str()], None).failure();
    let c = common::run_summary(&cut);
    assert_eq!(serde_json::to_value(&b.summaries).unwrap(), serde_json::to_value(&c.summaries).unwrap());
}

#[test]
fn report_renders_a_run_again_from_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let run = dir.path().join("run");
    let first = mock(&[cfg.as_os_str(), "--output".as_ref(), run.as_os_str()], None).failure();
    let written = artifacts(&run);
    for name in written.keys() {
        std::fs::remove_file(run.join(name)).unwrap();
    }
    let again = benchkit().arg("report").arg(&run).assert().success();
    assert_eq!(table(&stdout(&again)).trim_end(), table(&stdout(&first)).trim_end());
    assert_eq!(artifacts(&run), written, "every file as the run wrote it");

    let other = dir.path().join("csv-only");
    std::fs::create_dir(&other).unwrap();
    for f in ["run.json", "events.jsonl"] {
        std::fs::copy(run.join(f), other.join(f)).unwrap();
    }
    std::fs::create_dir(other.join("cells")).unwrap();
    benchkit().arg("report").arg(&other).args(["--reporter", "builtin:csv"]).assert().success();
    assert_eq!(artifacts(&other).keys().collect::<Vec<_>>(), ["cells.csv", "repeats.csv"]);
    assert_eq!(artifacts(&other)["repeats.csv"], written["repeats.csv"]);
}

#[test]
fn results_of_another_schema_are_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let run = dir.path().join("run");
    mock(&[cfg.as_os_str(), "--output".as_ref(), run.as_os_str()], None).failure();
    let ours = benchkit::report::SCHEMA_VERSION;
    let record = std::fs::read_to_string(run.join("run.json")).unwrap();
    let old = record.replacen(&format!("\"schema\": \"{ours}\","), "", 1);
    assert_ne!(old, record, "run.json names its schema");
    std::fs::write(run.join("run.json"), old).unwrap();
    for args in
        [vec!["report".as_ref(), run.as_os_str()], vec!["run".as_ref(), "--resume".as_ref(), run.as_os_str()]]
    {
        let out = benchkit().args(&args).assert().failure();
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains("schema 0.1.0") && err.contains(&format!("schema {ours}")), "{err}");
        assert!(err.contains(&run.display().to_string()), "{err}");
    }
    let out = benchkit().arg("compare").arg(&run).arg(&run).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("schema 0.1.0"), "{err}");
}

/// `seeds = 3` with two repeats each: six repeats a cell, seeds 1, 2, 3 in
/// turn, and accuracy across seeds apart from the repeats of one seed.
#[test]
fn seeds_train_each_cell_with_each_seed_and_spread_apart_from_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let text = std::fs::read_to_string(&cfg).unwrap().replace("repeats = 3", "repeats = 2\nseeds = 3");
    std::fs::write(&cfg, text).unwrap();
    let out = dir.path().join("run");
    let assert = mock(&[cfg.as_os_str(), "--output".as_ref(), out.as_os_str()], None).failure();
    let text = stdout(&assert);
    assert!(text.contains("across seeds"), "{text}");
    let summary = common::run_summary(&out);
    let seeds: Vec<u64> =
        summary.repeats.iter().filter(|r| r.cell == "batch_size=32,width=0.125").map(|r| r.seed).collect();
    assert_eq!(seeds, [1, 1, 2, 2, 3, 3]);
    let first = &summary.summaries[0];
    assert_eq!(first.repeats, 6);
    let spread = first.seeds.as_ref().expect("a spread across seeds");
    assert_eq!(spread.seeds, 3, "{spread:?}");
    let acc = &spread.final_test_accuracy;
    assert!((acc.max - acc.min - 0.02).abs() < 1e-9, "the mock's seeds differ by 2 points: {spread:?}");
    assert_eq!(spread.accuracy_repeat_mad, 0.0, "repeats of a seed agree: {spread:?}");
    assert_eq!(spread.target_reached_seeds, 3, "{spread:?}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Seeds") && md.contains("- seeds per cell: 3 (2 repeat(s) each)"), "{md}");
}

/// `batch_size = "max"` under the mock, whose cells run out of memory past
/// 1,024 images: the search doubles to 2,048, narrows back, and the cell
/// trains at 1,024 with every trial in its result. A resumed cell takes the
/// search its kept repeat made, and tries nothing again.
#[test]
fn batch_size_max_searches_then_trains_at_the_batch_found() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("batch_size = 32\n", "batch_size = \"max\"\n")
        .replace("\"train.batch_size\" = [32, 64]", "\"train.lr\" = [0.1]")
        .replace("\"model.config.width\" = [0.125, 0.25]", "\"model.config.width\" = [0.125]")
        .replace("repeats = 3", "repeats = 2");
    std::fs::write(&cfg, text).unwrap();
    let out = dir.path().join("run");
    // 13 trials and the first repeat, then killed.
    let killed = mock(&[cfg.as_os_str(), "--output".as_ref(), out.as_os_str()], Some(14)).failure();
    assert_eq!(killed.get_output().status.code(), Some(137));
    // One attempt allowed: the second repeat, with no trial before it.
    let assert = mock(&["--resume".as_ref(), out.as_os_str()], Some(1)).success();
    let text = stdout(&assert);
    assert!(text.contains("batch_size = \"max\" found 1024 (tried 8 ✓, 16 ✓"), "{text}");
    for repeat in common::run_summary(&out).repeats {
        assert_eq!(repeat.batch_size, 1024, "{repeat:?}");
        let search = repeat.batch_search.expect("the search each repeat trained after");
        let tried: Vec<(usize, bool)> = search.trials.iter().map(|t| (t.batch, t.fits)).collect();
        assert_eq!(
            tried,
            [
                (8, true),
                (16, true),
                (32, true),
                (64, true),
                (128, true),
                (256, true),
                (512, true),
                (1024, true),
                (2048, false),
                (1536, false),
                (1280, false),
                (1152, false),
                (1088, false)
            ]
        );
    }
}

/// Every cell's summary in `dir`'s summary.json, by cell id.
fn summaries(dir: &Path) -> BTreeMap<String, CellSummary> {
    common::run_summary(dir).summaries.into_iter().map(|s| (s.cell.clone(), s)).collect()
}

/// Two worker counts × two batches, in the order the matrix lists them.
fn scaling_config(dir: &Path, name: &str, devices: &str, batches: &str) -> PathBuf {
    let text = std::fs::read_to_string(config(dir)).unwrap().replace(
        "\"train.batch_size\" = [32, 64]\n\"model.config.width\" = [0.125, 0.25]",
        &format!("devices = {devices}\n\"train.batch_size\" = {batches}"),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Weak scaling against the 1-worker cell at the per-worker batch, strong
/// against the one at the global batch, whatever order the cells ran in;
/// `benchkit report` computes them again from the stored results.
#[test]
fn scaling_has_its_own_baseline_whatever_the_cell_order() {
    let dir = tempfile::tempdir().unwrap();
    let forward = scaling_config(dir.path(), "forward", "[1, 2]", "[32, 64]");
    let backward = scaling_config(dir.path(), "backward", "[2, 1]", "[64, 32]");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    mock(&[forward.as_os_str(), "-o".as_ref(), a.as_os_str()], None).success();
    mock(&[backward.as_os_str(), "-o".as_ref(), b.as_os_str()], None).success();
    let (a, b_all) = (summaries(&a), summaries(&b));
    for (cell, s) in &a {
        let other = &b_all[cell];
        assert_eq!(s.weak_scaling, other.weak_scaling, "{cell}: weak scaling depends on the cell order");
        assert_eq!(
            s.strong_scaling, other.strong_scaling,
            "{cell}: strong scaling depends on the cell order"
        );
    }
    let speed = |cell: &str| a[cell].images_per_s.expect("a measured speed").median;
    let two = &a["devices=2,batch_size=64"];
    // Weak: 64 over 2 replicas is 32 a replica, against the 1-replica batch 32.
    let weak = two.weak_scaling.as_ref().expect("weak scaling");
    assert_eq!(weak.baseline_cell, "devices=1,batch_size=32", "{two:?}");
    let expected = speed("devices=2,batch_size=64") / (2.0 * speed("devices=1,batch_size=32"));
    assert!((weak.efficiency.median - expected).abs() < 1e-12, "{weak:?}");
    // Strong: the same global batch, 64, on one replica.
    let strong = two.strong_scaling.as_ref().expect("strong scaling");
    assert_eq!(strong.baseline_cell, "devices=1,batch_size=64", "{two:?}");
    let expected = speed("devices=2,batch_size=64") / (2.0 * speed("devices=1,batch_size=64"));
    assert!((strong.efficiency.median - expected).abs() < 1e-12, "{strong:?}");
    // Batch 32 on 2 replicas: weak against batch 16, which no 1-replica cell ran.
    let small = &a["devices=2,batch_size=32"];
    assert!(small.weak_scaling.is_none(), "{small:?}");
    assert_eq!(
        small.strong_scaling.as_ref().map(|s| s.baseline_cell.as_str()),
        Some("devices=1,batch_size=32")
    );
    assert!(a["devices=1,batch_size=32"].strong_scaling.is_none());

    // The cell records hold it too, and `report` computes it again.
    let b = dir.path().join("b");
    let again = benchkit().arg("report").arg(&b).assert().success();
    let two = b_all["devices=2,batch_size=64"].shown().to_string();
    assert_eq!(two, "devices=2 · batch 64", "the table's name for the cell");
    // The baseline is named as the table names it too.
    let one = b_all["devices=1,batch_size=32"].shown().to_string();
    assert_eq!(one, "devices=1 · batch 32");
    assert!(stdout(&again).contains(&format!("{two}: weak scaling against {one}")), "{}", stdout(&again));
    assert_eq!(summaries(&b), b_all, "report writes the same summaries");
    let record = common::records(&b).into_iter().find(|r| r.cell == "devices=2,batch_size=64").unwrap();
    let stored = record.summary.and_then(|s| s.weak_scaling);
    assert_eq!(stored, b_all["devices=2,batch_size=64"].weak_scaling);
}

/// A `--mock` run says so in run.json, every result, every table and
/// report, and `compare` refuses to set it against a measured run.
#[test]
fn a_mock_run_is_marked_everywhere_and_never_compared_with_a_measured_one() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    // One cell killed at its first repeat with no retry: marked though no repeat finished.
    let text = std::fs::read_to_string(&cfg).unwrap().replace("repeats = 3", "repeats = 3\nretries = 0");
    std::fs::write(&cfg, text).unwrap();
    let out = dir.path().join("mock");
    let mut cmd = benchkit();
    cmd.arg("run").arg(&cfg).args(["--mock", "--quiet", "-o"]).arg(&out);
    let assert = cmd.env("BENCHKIT_MOCK_FLAKY", "batch_size=32,width=0.25").assert().failure();
    let text = stdout(&assert);
    assert!(text.starts_with("MOCK RUN"), "{text}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["mock"], true);
    let summary = common::run_summary(&out);
    assert!(summary.run.mock);
    assert!(summary.repeats.iter().all(|r| r.mock && r.energy.as_ref().is_some_and(|e| e.source == "mock")));
    let cells = &summary.summaries;
    assert!(cells.iter().any(|s| s.status == CellStatus::Failed && s.repeats == 0), "{cells:?}");
    assert!(cells.iter().all(|s| s.mock), "{cells:?}");
    for (file, mark) in [("report.md", "MOCK RUN"), ("report.html", "MOCK RUN"), ("cells.csv", ",true,")] {
        let text = std::fs::read_to_string(out.join(file)).unwrap();
        assert!(text.contains(mark), "{file} does not say it is a mock run");
    }

    // One real cell, measured: the mock cannot be compared with it.
    let real = common::small_config(
        dir.path(),
        "real",
        "",
        "source = \"synthetic\"\nshape = [1, 28, 28]\nnum_classes = 10",
        "max_steps_per_epoch = 2\nbatch_size = 8",
        "",
    );
    let measured = dir.path().join("measured");
    benchkit().args(["run", "-q", "-o"]).arg(&measured).arg(&real).assert().success();
    for (base, new) in [(&out, &measured), (&measured, &out)] {
        let refused = benchkit().arg("compare").arg(base).arg(new).assert().failure();
        let err = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
        assert!(err.contains(&format!("{} is a --mock run", out.display())), "{err}");
    }
    // Nor resumed as a measured run.
    let resumed = benchkit().args(["run", "--resume"]).arg(&out).assert().failure();
    let err = String::from_utf8_lossy(&resumed.get_output().stderr).into_owned();
    assert!(err.contains("holds a --mock run"), "{err}");
}

/// A repeat killed from outside is tried again and its attempts kept, up to
/// `retries` times over the cell; a deterministic failure is not.
#[test]
fn transient_failures_are_retried_and_deterministic_ones_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let flaky = "batch_size=32,width=0.25";
    let out = dir.path().join("run");
    let mut cmd = benchkit();
    cmd.arg("run").arg(&cfg).args(["--mock", "--quiet", "-o"]).arg(&out);
    let assert = cmd.env("BENCHKIT_MOCK_FAIL", FAILS).env("BENCHKIT_MOCK_FLAKY", flaky).assert().failure();
    let text = stdout(&assert);
    let record = |dir: &Path, cell: &str| -> CellRecord {
        common::records(dir).into_iter().find(|r| r.cell == cell).expect("the cell's record")
    };
    // Three repeats of the flaky cell, each killed once; two retries over the
    // cell, so its third repeat fails for good after its kill.
    let r = record(&out, flaky);
    let kinds: Vec<(u32, FailureKind, bool)> =
        r.failures.iter().map(|f| (f.repeat, f.kind, f.retried)).collect();
    let transient = FailureKind::Transient;
    assert_eq!(kinds, [(1, transient, true), (2, transient, true), (3, transient, false)], "{r:#?}");
    assert_eq!(r.repeats.len(), 2);
    let summary = r.summary.as_ref().expect("a summary");
    assert_eq!((summary.status, summary.retried), (CellStatus::Failed, 2));
    let shown = summary.shown();
    assert!(
        text.contains(&format!("{shown}: 2 attempt(s) failed for a transient cause and were run again")),
        "{text}"
    );
    // An MLPerf log per attempt: the earlier, killed ones under their own names.
    let earlier: Vec<String> = artifacts(&out).into_keys().filter(|n| n.ends_with("-attempt1.txt")).collect();
    assert_eq!(earlier.len(), 2, "{earlier:?}");
    assert!(earlier.iter().all(|n| n.contains("-r1-") || n.contains("-r2-")), "{earlier:?}");
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(!stderr.contains("reporter"), "every reporter wrote its files: {stderr}");
    // The deterministic failure of the last repeat is not tried again.
    let r = record(&out, FAILS);
    assert_eq!(r.failures.len(), 1, "{r:#?}");
    assert_eq!((r.failures[0].kind, r.failures[0].retried), (FailureKind::Deterministic, false));

    // Five retries: every repeat of the flaky cell ends measured.
    let text = std::fs::read_to_string(&cfg).unwrap().replace("repeats = 3", "repeats = 3\nretries = 5");
    std::fs::write(&cfg, text).unwrap();
    let out = dir.path().join("patient");
    let mut cmd = benchkit();
    cmd.arg("run").arg(&cfg).args(["--mock", "--quiet", "-o"]).arg(&out);
    cmd.env("BENCHKIT_MOCK_FLAKY", flaky).assert().success();
    let r = record(&out, flaky);
    assert_eq!((r.repeats.len(), r.failures.len()), (3, 3));
    let summary = r.summary.as_ref().expect("a summary");
    assert_eq!((summary.status, summary.retried), (CellStatus::Ok, 3));
}

/// `--reference` moves `rel` in every report, not only in the terminal
/// table, and `report --reference` moves it again.
#[test]
fn every_report_measures_rel_against_the_reference_cell() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let out = dir.path().join("run");
    let row_of = |text: &str, cell: &str| -> String {
        text.lines().find(|l| l.starts_with(&format!("| {cell} |"))).unwrap_or_default().to_string()
    };
    let reference = "batch_size=64,width=0.125";
    let args = [cfg.as_os_str(), "-o".as_ref(), out.as_os_str(), "--reference".as_ref(), reference.as_ref()];
    let table = stdout(&mock(&args, None).failure());
    // Rows are named by their labels; the reference is given by its id.
    let label = |id: &str| summaries(&out)[id].shown().to_string();
    assert_eq!(label(reference), "resnet-18 ×0.125 · batch 64");
    let line = table.lines().find(|l| l.starts_with(&label(reference))).unwrap();
    assert!(line.contains(" 1.00× "), "{line}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(row_of(&md, &label(reference)).contains("| 1.00× |"), "{md}");
    assert!(!row_of(&md, &label("batch_size=32,width=0.125")).contains("| 1.00× |"), "{md}");

    // Another workload's cell (width 0.25 is another model) is that
    // workload's reference; the first keeps its own.
    let other = "batch_size=32,width=0.25";
    benchkit().arg("report").arg(&out).args(["--reference", other]).assert().success();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    if summaries(&out)[other].status == CellStatus::Ok {
        assert!(row_of(&md, &label(other)).contains("| 1.00× |"), "{md}");
    } else {
        assert!(md.contains(&format!("reference cell {other} not found or failed; rel: ")), "{md}");
    }
}
