//! A matrix spread over a cluster, through the real binary and the deploy
//! files: slices run as a Slurm job array task and a Kubernetes Indexed Job
//! completion run them (`run --slice auto`), `merge` joins them into what
//! one run of the whole matrix gives, refuses slices that do not make one
//! matrix, and keeps each cell's machine. Cells run through the mock
//! executor (`--mock`), whose figures depend only on the cell.

use crate::common;

use benchkit_schema::{CellRecord, CellStatus, Event, RunStart, Stamped};
use common::{benchkit, repo};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Cells in matrix order: slice k of 3 owns positions k and k + 3.
const CELLS: [&str; 6] = [
    "batch_size=32,width=0.125",
    "batch_size=32,width=0.25",
    "batch_size=64,width=0.125",
    "batch_size=64,width=0.25",
    "batch_size=128,width=0.125",
    "batch_size=128,width=0.25",
];

/// A 6-cell config `<name>.toml` in `dir`, with `extra` top-level tables.
fn config(dir: &Path, name: &str, lr: f64, extra: &str) -> PathBuf {
    let tail = format!(
        r#"{extra}

[matrix]
"train.batch_size" = [32, 64, 128]
"model.config.width" = [0.125, 0.25]

[[reporters]]
plugin = "builtin:html"

[[reporters]]
plugin = "builtin:markdown"

[[reporters]]
plugin = "builtin:csv"
"#
    );
    common::small_config(
        dir,
        name,
        "repeats = 2",
        "source = \"synthetic\"\nshape = [1, 28, 28]\nnum_classes = 10",
        &format!("epochs = 2\nlr = {lr}\ntarget_accuracy = 0.7"),
        &tail,
    )
}

fn stdout(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

fn stderr(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
}

/// The table a run or a merge printed, without the lines naming its directory.
fn table(out: &str) -> String {
    out.lines()
        .take_while(|l| !["results in ", "merged ", "wrote "].iter().any(|p| l.starts_with(p)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The directory holding the `benchkit` binary, for a deploy script's PATH.
fn path_with_benchkit() -> String {
    let bin = assert_cmd::cargo::cargo_bin("benchkit");
    let dir = bin.parent().unwrap().display().to_string();
    format!("{dir}:{}", std::env::var("PATH").unwrap_or_default())
}

/// `benchkit run CONFIG --slice <slice> --mock` into `out`.
fn slice(cfg: &Path, out: &Path, slice: &str) -> assert_cmd::assert::Assert {
    benchkit().arg("run").arg(cfg).args(["--slice", slice, "--mock", "--quiet", "-o"]).arg(out).assert()
}

/// A slice's run.json, events and cell records copied to `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("cells")).unwrap();
    for name in ["run.json", "events.jsonl"] {
        std::fs::copy(from.join(name), to.join(name)).unwrap();
    }
    for entry in std::fs::read_dir(from.join("cells")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join("cells").join(entry.file_name())).unwrap();
    }
}

/// Shift the time of line `line` (from 0; -1 for the last) of `dir`'s events by `ms`.
fn shift_event(dir: &Path, line: isize, ms: i64) {
    let path = dir.join("events.jsonl");
    let mut lines: Vec<Value> =
        std::fs::read_to_string(&path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let i = if line < 0 { lines.len() - 1 } else { line as usize };
    let t = lines[i]["time_ms"].as_i64().unwrap();
    lines[i]["time_ms"] = (t + ms).into();
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).unwrap();
}

fn run_json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap()
}

/// Cell id -> its record in `dir`, read through the schema's types, by id.
fn records(dir: &Path) -> Vec<(String, CellRecord)> {
    let mut out: Vec<(String, CellRecord)> =
        common::records(dir).into_iter().map(|r| (r.cell.clone(), r)).collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A record's repeats as JSON, for comparing two copies (a NaN equals itself there).
fn repeats_json(record: &CellRecord) -> Value {
    serde_json::to_value(&record.repeats).unwrap()
}

fn events(dir: &Path) -> Vec<Stamped> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| Stamped::parse(l).unwrap_or_else(|e| panic!("{}: {e}: {l}", dir.display())))
        .collect()
}

/// The Indexed Job of `deploy/kubernetes-sweep.yaml`: its shell command
/// and its environment.
fn indexed_job() -> (String, Vec<(String, String)>) {
    let text = std::fs::read_to_string(repo().join("deploy/kubernetes-sweep.yaml")).unwrap();
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let job = docs.iter().find(|d| d["kind"] == "Job").expect("a Job");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let command: Vec<&str> =
        container["command"].as_sequence().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(&command[..2], ["sh", "-c"]);
    let env: Vec<(String, String)> = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().into(), e["value"].as_str().unwrap().into()))
        .collect();
    let count = env.iter().find(|(k, _)| k == "BENCHKIT_SLICE_COUNT").expect("the slice count").1.clone();
    assert_eq!(
        job["spec"]["completions"].as_u64().map(|c| c.to_string()),
        Some(count),
        "BENCHKIT_SLICE_COUNT must equal the Job's completions"
    );
    (command[2].to_string(), env)
}

/// The deploy files parse: the Slurm script with `bash -n`, every YAML
/// document, and the merge Job mounts the claim the sweep writes to.
#[test]
fn the_deploy_files_for_sliced_sweeps_parse() {
    let status = std::process::Command::new("bash")
        .arg("-n")
        .arg(repo().join("deploy/slurm-sweep.sbatch"))
        .status()
        .unwrap();
    assert!(status.success());
    let (_, env) = indexed_job();
    assert!(env.iter().any(|(k, _)| k == "RESULTS"));
    let merge = std::fs::read_to_string(repo().join("deploy/kubernetes-merge.yaml")).unwrap();
    let merge: serde_yaml::Value = serde_yaml::from_str(&merge).unwrap();
    let volumes = &merge["spec"]["template"]["spec"]["volumes"][0];
    assert_eq!(volumes["persistentVolumeClaim"]["claimName"], "benchkit-sweep-results");
    let command = merge["spec"]["template"]["spec"]["containers"][0]["command"][2].as_str().unwrap();
    assert!(command.contains("benchkit merge"), "{command}");
}

/// Two slices as Slurm array tasks, one as an Indexed Job completion,
/// each through its deploy file, into one sweep directory, merged by the
/// Slurm script's merge step: the whole run's cells, figures and table,
/// and one run's events.
#[test]
fn slices_from_slurm_and_kubernetes_merge_into_the_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "sweep", 0.1, "");
    let whole_dir = dir.path().join("whole");
    let whole =
        benchkit().arg("run").arg(&cfg).args(["--mock", "--quiet", "-o"]).arg(&whole_dir).assert().success();

    for task in ["0", "1"] {
        let mut cmd = assert_cmd::Command::new("bash");
        cmd.arg(repo().join("deploy/slurm-sweep.sbatch"))
            .arg(&cfg)
            .args(["--mock", "--quiet"])
            .current_dir(dir.path())
            .env("PATH", path_with_benchkit())
            .env("BENCHKIT_CACHE_DIR", common::cache())
            .envs([
                ("SLURM_ARRAY_JOB_ID", "77"),
                ("SLURM_ARRAY_TASK_ID", task),
                ("SLURM_ARRAY_TASK_MIN", "0"),
                ("SLURM_ARRAY_TASK_MAX", "2"),
                ("SLURM_ARRAY_TASK_STEP", "1"),
                ("SLURM_ARRAY_TASK_COUNT", "3"),
            ]);
        cmd.assert().success();
    }
    let sweep = dir.path().join("results/sweep-77");
    let (script, env) = indexed_job();
    let mut pod = assert_cmd::Command::new("sh");
    pod.args(["-c", &script])
        .envs(env)
        .env("PATH", path_with_benchkit())
        .env("BENCHKIT_CACHE_DIR", common::cache());
    // The pod's own paths and arguments, for a run on this machine.
    pod.env("CONFIG", &cfg)
        .env("RESULTS", &sweep)
        .env("RUN_ARGS", "--mock --quiet")
        .env("JOB_COMPLETION_INDEX", "2")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .assert()
        .success();

    // Slice k owns cells k and k + 3.
    let owned = |k: usize| -> BTreeSet<String> { [CELLS[k].to_string(), CELLS[k + 3].to_string()].into() };
    for k in 0..3 {
        let slice = sweep.join(format!("slice-{k}"));
        let run = run_json(&slice);
        assert_eq!(run["slice"]["index"], k, "{}", slice.display());
        assert_eq!(run["slice"]["count"], 3);
        assert_eq!(run["slice"]["matrix"].as_array().unwrap().len(), 6);
        let held: BTreeSet<String> = records(&slice).into_iter().map(|(id, _)| id).collect();
        assert_eq!(held, owned(k), "{}", slice.display());
    }
    let k8s = run_json(&sweep.join("slice-2"));
    assert!(k8s["slice"]["from"].as_str().unwrap().contains("JOB_COMPLETION_INDEX=2"), "{k8s}");
    assert_eq!(k8s["slice"]["config_sha256"], run_json(&sweep.join("slice-1"))["slice"]["config_sha256"]);

    let mut merge = assert_cmd::Command::new("bash");
    merge
        .arg(repo().join("deploy/slurm-sweep.sbatch"))
        .args(["--merge".as_ref(), sweep.as_os_str()])
        .env("PATH", path_with_benchkit())
        .env("BENCHKIT_CACHE_DIR", common::cache());
    let merged_out = merge.assert().success();
    let merged = sweep.join("merged");

    assert_eq!(table(&stdout(&merged_out)), table(&stdout(&whole)), "the merged table is the whole run's");
    let (a, b) = (records(&whole_dir), records(&merged));
    assert_eq!(a.iter().map(|r| &r.0).collect::<Vec<_>>(), b.iter().map(|r| &r.0).collect::<Vec<_>>());
    for ((id, whole), (_, merged)) in a.iter().zip(&b) {
        assert_eq!(repeats_json(whole), repeats_json(merged), "{id}: the same repeats");
        let machine = merged.summary.as_ref().and_then(|s| s.machine.as_ref());
        assert!(machine.is_some_and(|m| !m.cpu_model.is_empty()), "{id}: its machine is kept");
    }
    let log = events(&merged);
    let starts: Vec<&RunStart> = log
        .iter()
        .filter_map(|e| if let Event::RunStart(s) = &e.event { Some(&**s) } else { None })
        .collect();
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0].cells.len(), 6);
    assert_eq!(log.iter().filter(|e| matches!(e.event, Event::CellSummary(_))).count(), 6);
    assert_eq!(log.iter().filter(|e| matches!(e.event, Event::Cell(_))).count(), 12, "2 repeats of 6 cells");
    let end = log.last().map(|e| &e.event);
    assert!(matches!(end, Some(Event::RunEnd(e)) if e.cells == 6), "{end:?}");
    let from = run_json(&merged)["merged_from"].as_array().unwrap().clone();
    assert_eq!(from.len(), 3);
    assert!(merged.join("report.html").is_file() && merged.join("report.md").is_file());
    let report = benchkit().arg("report").arg(&merged).assert().success();
    assert_eq!(table(&stdout(&report)), table(&stdout(&whole)), "`report` reads the merged run back");
}

/// Slices that do not make one matrix are refused, naming what is wrong,
/// and no merged directory is left behind.
#[test]
fn merge_refuses_a_missing_slice_a_duplicated_cell_and_another_config() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "sweep", 0.1, "");
    let s: Vec<PathBuf> = (0..3).map(|k| dir.path().join(format!("s{k}"))).collect();
    for (k, out) in s.iter().enumerate() {
        slice(&cfg, out, &format!("{k}/3")).success();
    }
    let out = dir.path().join("merged");
    let refuse = |dirs: &[&Path]| {
        let assert = benchkit().arg("merge").arg(&out).args(dirs).assert().failure();
        assert!(!out.exists(), "nothing written");
        stderr(&assert)
    };

    let missing = refuse(&[&s[0], &s[1]]);
    assert!(
        missing.contains(&format!("cell {} is missing: it belongs to slice 2 of 3", CELLS[2])),
        "{missing}"
    );
    assert!(missing.contains(CELLS[5]), "both of slice 2's cells: {missing}");

    let copy = dir.path().join("s1-again");
    copy_dir(&s[1], &copy);
    let duplicated = refuse(&[&s[0], &s[1], &s[2], &copy]);
    assert!(duplicated.contains(&format!("cell {} is duplicated", CELLS[1])), "{duplicated}");
    assert!(duplicated.contains("s1-again"), "{duplicated}");

    let other_cfg = config(dir.path(), "other", 0.2, "");
    let other = dir.path().join("other2");
    slice(&other_cfg, &other, "2/3").success();
    let foreign = refuse(&[&s[0], &s[1], &other]);
    assert!(foreign.contains("ran another config than"), "{foreign}");
    assert!(foreign.contains("other.toml") && foreign.contains("SHA-256"), "{foreign}");

    // A slice whose run.json names a cell's file outside the merged
    // directory (altered, or written by something else) is refused.
    let hostile = dir.path().join("s2-altered");
    copy_dir(&s[2], &hostile);
    let mut run = run_json(&hostile);
    run["cells"][0]["slug"] = "../../escaped".into();
    std::fs::write(hostile.join("run.json"), serde_json::to_vec_pretty(&run).unwrap()).unwrap();
    let altered = refuse(&[&s[0], &s[1], &hostile]);
    assert!(
        altered.contains("the file name \"../../escaped\"") && altered.contains("s2-altered"),
        "{altered}"
    );
    assert!(!dir.path().join("escaped.json").exists());

    let halves = dir.path().join("half");
    slice(&cfg, &halves, "1/2").success();
    let split = refuse(&[&s[0], &halves]);
    assert!(split.contains("slice of 3") && split.contains("of 2"), "{split}");

    let whole = dir.path().join("whole");
    benchkit().arg("run").arg(&cfg).args(["--mock", "--quiet", "-o"]).arg(&whole).assert().success();
    let unsliced = refuse(&[&whole]);
    assert!(unsliced.contains("not a slice"), "{unsliced}");

    let into_a_slice = stderr(&benchkit().arg("merge").arg(&s[0]).args(&s).assert().failure());
    assert!(into_a_slice.contains("is one of the slices"), "{into_a_slice}");
    let merged = dir.path().join("merged-once");
    benchkit().arg("merge").arg(&merged).args(&s).assert().success();
    let remerged = refuse(&[&merged]);
    assert!(remerged.contains("already a merged run (of 3 slices)"), "{remerged}");

    for bad in ["3/3", "1/0", "two/3"] {
        let err = stderr(&slice(&cfg, &dir.path().join("bad"), bad).failure());
        assert!(err.contains(&format!("--slice {bad}")) || err.contains("slice 3 of 3"), "{bad}: {err}");
    }
    let err = stderr(&slice(&cfg, &dir.path().join("bad"), "auto").failure());
    assert!(err.contains("SLURM_ARRAY_TASK_ID") && err.contains("JOB_COMPLETION_INDEX"), "{err}");
}

/// Each slice loads the plugins of its own cells: a matrix that sweeps a
/// plugin merges, its run lists every plugin once, and a slice that owns
/// no cell (more slices than cells) merges too, given first.
#[test]
fn slices_of_a_swept_plugin_and_an_empty_slice_merge() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(config(dir.path(), "base", 0.1, "")).unwrap();
    let swept = text.replace(
        "\"model.config.width\" = [0.125, 0.25]",
        "\"transform.plugin\" = [\"builtin:normalize\", \"builtin:grayscale-to-rgb\"]",
    );
    let swept = swept.replace("\"train.batch_size\" = [32, 64, 128]", "");
    let cfg = dir.path().join("swept.toml");
    std::fs::write(&cfg, swept).unwrap();
    let s: Vec<PathBuf> = (0..3).map(|k| dir.path().join(format!("s{k}"))).collect();
    for (k, out) in s.iter().enumerate() {
        slice(&cfg, out, &format!("{k}/3")).success();
    }
    assert!(records(&s[2]).is_empty(), "2 cells, 3 slices: the third owns none");
    // The merged run's wall time is the sweep's span, from the first
    // slice's start to the last event of any: slice 0 started 5 s before
    // the mock's fixed instant, slice 1 ended 7 s after it.
    shift_event(&s[0], 0, -5_000);
    shift_event(&s[1], -1, 7_000);
    let out = dir.path().join("merged");
    benchkit().arg("merge").arg(&out).args([&s[2], &s[0], &s[1]]).assert().success();
    let log = events(&out);
    let (start, end) = (&log[0], log.last().unwrap());
    assert!(matches!(start.event, Event::RunStart(_)), "{start:?}");
    let Event::RunEnd(ended) = &end.event else { panic!("the log ends with run-end: {end:?}") };
    assert_eq!(end.time_ms - start.time_ms, 12_000);
    assert_eq!(ended.wall_s, 12.0);
    assert_eq!(records(&out).len(), 2);
    let transforms: Vec<String> = run_json(&out)["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"] == "transform")
        .map(|p| p["origin"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(transforms, ["builtin:normalize", "builtin:grayscale-to-rgb"]);
}

/// A cell that failed on its slice is merged as failed, named with the
/// command that runs it again; `--resume` on that slice runs only it, and
/// the merge after has every cell, the slice's other cell as it was. A
/// slice killed before its last cell is named with the same remedy.
#[test]
fn a_cell_that_failed_on_its_slice_is_run_again_and_merged() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "sweep", 0.1, "");
    let s: Vec<PathBuf> = (0..3).map(|k| dir.path().join(format!("s{k}"))).collect();
    slice(&cfg, &s[0], "0/3").success();
    let failing = benchkit()
        .arg("run")
        .arg(&cfg)
        .args(["--slice", "1/3", "--mock", "--quiet", "-o"])
        .arg(&s[1])
        .env("BENCHKIT_MOCK_FAIL", CELLS[4])
        .assert()
        .failure();
    assert!(stderr(&failing).contains("1 of 2 cell(s) failed"), "{}", stderr(&failing));
    // Killed after 3 of its 4 attempts: its second cell never finished.
    benchkit()
        .arg("run")
        .arg(&cfg)
        .args(["--slice", "2/3", "--mock", "--quiet", "-o"])
        .arg(&s[2])
        .env("BENCHKIT_MOCK_STOP_AFTER", "3")
        .assert()
        .failure();

    let out = dir.path().join("m1");
    let cut = benchkit().arg("merge").arg(&out).args(&s).assert().failure();
    let err = stderr(&cut);
    assert!(err.contains(&format!("cell {}", CELLS[5])), "{err}");
    assert!(err.contains(&format!("benchkit run --resume {}", s[2].display())), "{err}");
    benchkit().args(["run", "--mock", "--quiet", "--resume"]).arg(&s[2]).assert().success();

    // Merged with the failure, which makes the exit status 1, as `run`'s.
    let merged = benchkit().arg("merge").arg(&out).args(&s).assert().failure();
    let warning = stderr(&merged);
    assert!(warning.contains(&format!("cell {} failed in {}", CELLS[4], s[1].display())), "{warning}");
    assert!(warning.contains(&format!("benchkit run --resume {}", s[1].display())), "{warning}");
    assert!(warning.contains("1 of 6 cell(s) failed"), "{warning}");
    assert!(stdout(&merged).contains("FAILED"), "{}", stdout(&merged));
    assert_eq!(records(&out).len(), 6);
    let again_same = stderr(&benchkit().arg("merge").arg(&out).args(&s).assert().failure());
    assert!(
        again_same.contains("already holds a run; remove it or merge into another directory"),
        "{again_same}"
    );
    let kept = records(&s[1]).into_iter().find(|(id, _)| id == CELLS[1]).unwrap().1;

    benchkit().args(["run", "--mock", "--quiet", "--resume"]).arg(&s[1]).assert().success();
    let again = dir.path().join("m2");
    let merged = benchkit().arg("merge").arg(&again).args(&s).assert().success();
    assert!(!stdout(&merged).contains("FAILED"), "{}", stdout(&merged));
    assert!(stderr(&merged).is_empty(), "{}", stderr(&merged));
    let cells = records(&again);
    assert_eq!(cells.len(), 6);
    let rerun = &cells.iter().find(|(id, _)| id == CELLS[4]).unwrap().1;
    assert_eq!(rerun.summary.as_ref().map(|s| s.status), Some(CellStatus::Ok));
    let other = &cells.iter().find(|(id, _)| id == CELLS[1]).unwrap().1;
    assert_eq!(repeats_json(other), repeats_json(&kept), "the slice's finished cell was not run again");
}

/// A slice that ran on another kind of machine (its recorded CPU changed,
/// as a slice from another machine would have it) shows a machine column and
/// legend in the table, the Markdown and the HTML, and `compare` sets the
/// two machines side by side instead of calling the change a regression.
/// Each machine pays its own `[cost.machines]` price.
#[test]
fn a_slice_from_another_machine_shows_its_machine_and_its_price() {
    let dir = tempfile::tempdir().unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
    let prices = format!(
        "[cost]\nusd_per_hour = {{ flex = 1.0 }}\nmachines = {{ \"{host}\" = 3.0, \"No Such CPU\" = 9.0 }}"
    );
    let cfg = config(dir.path(), "sweep", 0.1, &prices);
    let plain_cfg = config(dir.path(), "plain", 0.1, "[cost]\nusd_per_hour = { flex = 1.0 }");
    let plain = dir.path().join("plain");
    slice(&plain_cfg, &plain, "0/3").success();
    let s: Vec<PathBuf> = (0..3).map(|k| dir.path().join(format!("s{k}"))).collect();
    for (k, out) in s.iter().enumerate() {
        slice(&cfg, out, &format!("{k}/3")).success();
    }
    // This host's price, 3 × the backend's: $/epoch triples.
    let (priced, unpriced) = (records(&s[0]), records(&plain));
    for ((id, p), (_, u)) in priced.iter().zip(&unpriced) {
        assert_eq!(p.repeats[0].usd_per_hour, Some(3.0), "{id}");
        let (p, u) = (p.repeats[0].usd_per_epoch.unwrap(), u.repeats[0].usd_per_epoch.unwrap());
        assert!((p / u - 3.0).abs() < 1e-9, "{id}: {p} vs {u}");
    }

    let cpu = run_json(&s[2])["environment"]["cpu_model"].as_str().unwrap().to_string();
    let fake = "Fake EPYC 9999 64-Core";
    let mut files = vec![s[2].join("run.json"), s[2].join("events.jsonl")];
    files.extend(std::fs::read_dir(s[2].join("cells")).unwrap().map(|e| e.unwrap().path()));
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        std::fs::write(
            &f,
            text.replace(&format!("\"cpu_model\": \"{cpu}\""), &format!("\"cpu_model\": \"{fake}\""))
                .replace(&format!("\"cpu_model\":\"{cpu}\""), &format!("\"cpu_model\":\"{fake}\"")),
        )
        .unwrap();
    }
    let out = dir.path().join("merged");
    let merged = benchkit().arg("merge").arg(&out).args(&s).assert().success();
    let text = stdout(&merged);
    let header = text.lines().find(|l| l.starts_with("cell ")).unwrap();
    assert!(header.contains(" machine "), "{text}");
    let summary = common::run_summary(&out);
    for (k, id) in CELLS.iter().enumerate() {
        // The table names a cell by its label.
        let cell = summary.summaries.iter().find(|c| c.cell == *id).expect("every cell merged");
        let row = text.lines().find(|l| l.starts_with(&format!("{} ", cell.shown()))).unwrap();
        let tag = if k % 3 == 2 { " m2 " } else { " m1 " };
        assert!(row.contains(tag), "{id} ran on {tag}: {row}");
    }
    assert!(text.contains(&format!("m2: {fake}, ")), "{text}");
    assert!(text.contains(&format!("(host {host})")), "{text}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Machines the cells ran on") && html.contains(fake), "the HTML legend");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| machine |") && md.contains(&format!("- m2: {fake}")), "{md}");
    let csv = std::fs::read_to_string(out.join("cells.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains(",machine,host,"), "{csv}");
    assert_eq!(csv.lines().filter(|l| l.contains(fake)).count(), 2, "slice 2's two cells: {csv}");

    // The whole matrix on this machine against the merged run: slice 2's
    // cells moved machine, which is no regression.
    let whole = dir.path().join("whole");
    benchkit().arg("run").arg(&cfg).args(["--mock", "--quiet", "-o"]).arg(&whole).assert().success();
    let compare = benchkit().arg("compare").arg(&whole).arg(&out).assert().success();
    let text = stdout(&compare);
    for id in [CELLS[2], CELLS[5]] {
        let row = text.lines().find(|l| l.starts_with(&format!("{id} "))).unwrap();
        assert!(row.contains("not alike: machine m1 → m2"), "{row}");
        assert!(row.matches('$').count() == 2, "each side's $/epoch: {row}");
    }
    assert!(text.contains(&format!("m2: {fake}")), "{text}");
}

/// A run stopped after a cell's first repeat and resumed on another kind
/// of machine (the record's machine changed, as another machine's would be)
/// sets that repeat aside: the cell's figures are the new machine's alone,
/// its summary says so, and the log keeps the old repeat.
#[test]
fn repeats_from_another_kind_of_machine_are_set_aside_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "sweep", 0.1, "");
    let out = dir.path().join("s0");
    benchkit()
        .arg("run")
        .arg(&cfg)
        .args(["--slice", "0/3", "--mock", "--quiet", "-o"])
        .arg(&out)
        .env("BENCHKIT_MOCK_STOP_AFTER", "1")
        .assert()
        .failure();
    let (id, mut record) = records(&out).into_iter().next().unwrap();
    assert_eq!(record.repeats.len(), 1, "{id}: one repeat kept");
    let path = std::fs::read_dir(out.join("cells")).unwrap().next().unwrap().unwrap().path();
    record.machine.as_mut().expect("the machine it ran on").cpu_model = "Fake EPYC 9999".into();
    std::fs::write(&path, serde_json::to_vec_pretty(&record).unwrap()).unwrap();

    benchkit().args(["run", "--mock", "--quiet", "--resume"]).arg(&out).assert().success();
    let (_, after) = records(&out).into_iter().find(|(i, _)| *i == id).unwrap();
    assert_eq!(after.repeats.len(), 2);
    let warnings = after.summary.as_ref().map(|s| s.warnings.join("; ")).unwrap_or_default();
    assert!(
        warnings.contains("1 repeat(s) measured on another kind of machine (Fake EPYC 9999"),
        "{warnings}"
    );
    let logged = events(&out).iter().filter(|e| matches!(&e.event, Event::Cell(c) if c.cell == id)).count();
    assert_eq!(logged, 3, "the set-aside repeat stays in events.jsonl");
}
