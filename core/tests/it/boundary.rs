//! End-to-end through the binary at the plugin boundary: an ImageNet-sized
//! run (224 × 224 RGB, the default evaluation batch of 256), hostile
//! reporters that cannot touch the run's files, and a plugin that cannot
//! forge why its cell failed.

use crate::common;

use benchkit_schema::{CellStatus, FailureKind};
use common::{benchkit, fixture, record, repo, small_config, status};
use serde_json::Value;
use std::path::Path;

fn read(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn fashion() -> String {
    format!(
        "path = {:?}\ntrain_limit = 64\ntest_limit = 64",
        repo().join("configs/data/fashion-mnist").display().to_string()
    )
}

/// Two cells at ImageNet size: two training steps of a small ResNet then a
/// full evaluation pass in batches of 256, and the loader alone.
#[test]
fn an_imagenet_sized_run_trains_and_evaluates() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("imagenet.toml");
    std::fs::write(
        &cfg,
        r#"name = "imagenet-size"
seed = 1

[data]
source = "synthetic"
shape = [3, 224, 224]
samples = 64
test_samples = 256
num_classes = 10

[transform]
plugin = "builtin:normalize"
config = { mean = [0.485, 0.456, 0.406], std = [0.229, 0.224, 0.225] }

[model]
plugin = "builtin:resnet"
config = { depth = 18, stem = "imagenet", width = 0.125 }

[train]
epochs = 1
batch_size = 16
warmup_steps = 1
max_steps_per_epoch = 2

[matrix]
mode = ["train", "loader-only"]
"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).arg("--quiet").assert().success();
    let train = record(&out.join("cells/000-mode=train.json"));
    assert_eq!(status(&train), CellStatus::Ok, "{train:#?}");
    let repeat = &train.repeats[0];
    let plan = &read(&out.join("run.json"))["cells"][0]["plan"];
    assert_eq!(plan["train"]["eval_batch_size"], 256, "the default evaluation batch: {plan:#}");
    assert_eq!(repeat.loader.decoded_shape, [3, 224, 224]);
    assert!((0.0..=1.0).contains(&repeat.final_test_accuracy), "{repeat:#?}");
    let loader = record(&out.join("cells/001-mode=loader-only.json"));
    assert_eq!(status(&loader), CellStatus::Ok, "{loader:#?}");
    assert!(loader.repeats[0].images_per_s > 0.0);
}

#[test]
fn hostile_reporters_cannot_touch_the_run_or_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = fixture("hostile_reporter").display().to_string();
    let reporter = |config: &str| format!("[[reporters]]\nplugin = {hostile:?}\nconfig = {config}\n");
    // Listed before `builtin:json`, which `small_config` adds after the train table.
    let first = reporter(r#"{ mode = "clash" }"#);
    let builtins =
        ["html", "csv", "markdown", "mllog"].map(|b| format!("[[reporters]]\nplugin = \"builtin:{b}\"\n"));
    let tail = [
        reporter(r#"{ mode = "badnames" }"#),
        reporter(r#"{ mode = "huge" }"#),
        reporter(r#"{ mode = "many" }"#),
        reporter(r#"{ mode = "poll", in = "on-event" }"#),
        reporter(r#"{ mode = "sleep", in = "create" }"#),
        builtins.concat(),
        "[plugins]\ncall_timeout_ms = 2000\nartifacts_mib = 16\n".into(),
    ]
    .join("\n");
    let cfg = small_config(dir.path(), "hostile", &first, &fashion(), "", &tail);
    let out = dir.path().join("results").join("run");
    let assert = benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).arg("--quiet").assert().success();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();

    // The run's own files and the built-in reporters' are theirs.
    let summary = read(&out.join("summary.json"));
    assert!(summary.get("forged").is_none() && summary["summaries"].is_array(), "{summary}");
    assert!(read(&out.join("run.json"))["base"].is_object());
    assert!(out.join("events.jsonl").metadata().unwrap().len() > 100);
    assert!(out.join("cells").is_dir());
    for name in ["report.html", "cells.csv"] {
        let text = std::fs::read_to_string(out.join(name)).unwrap();
        assert!(!text.contains("forged"), "{name}: {text}");
    }
    assert!(!out.join("study.json").exists() && !out.join("ranks.json").exists());
    assert!(!out.join("mllog-forged-r0.txt").exists());
    // Nothing escaped the results directory; the good artifact was written.
    assert!(!dir.path().join("results/escaped.txt").exists() && !Path::new("/tmp/absolute.txt").exists());
    let ok = std::fs::read_to_string(out.join("hostile-ok.txt")).unwrap();
    assert!(ok.ends_with(" events") && ok != "0 events", "the reporter saw the run: {ok}");
    // Every other name in the directory is one benchkit reserves for itself.
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let plugins = |n: &str| n == "hostile-ok.txt" || (n.starts_with('f') && n.ends_with(".txt"));
    let theirs = names.iter().filter(|n| plugins(n)).count();
    assert_eq!(theirs, 1 + 64, "at most 64 artifacts from the reporter that returned 1000: {names:?}");
    for name in names.iter().filter(|n| !plugins(n)) {
        assert!(
            benchkit::runner::store::layout::reserved(name).is_some(),
            "{name} is benchkit's but not reserved"
        );
    }

    // Each problem is a warning naming the reporter and the name it asked for.
    for needle in [
        "artifact \"../escaped.txt\" not written",
        "artifact \"run.json\" not written: run.json is one of the run's own files",
        "artifact \"summary.json\" not written: summary.json is a built-in reporter's file",
        "artifact \"Summary.JSON\" not written",
        "artifact \"study.json\" not written",
        "artifact \"mllog-forged-r0.txt\" not written: names starting with mllog- are a built-in reporter's",
        "returned 1000 artifacts; only the first 64 are written",
        "more than 17825792 bytes in `reporter.finish`",
        "exceeded its time limit of 2000 ms in `reporter.on-event`",
        "wasi:clocks/monotonic-clock#subscribe-duration` in `reporter.create`",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?} in:\n{stderr}");
    }
    assert!(
        stderr.lines().filter(|l| l.starts_with("warning: reporter ")).all(|l| l.contains(&hostile)),
        "{stderr}"
    );
}

#[test]
fn a_plugin_cannot_forge_why_its_cell_failed() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("misbehave").display().to_string();
    let mut text =
        std::fs::read_to_string(small_config(dir.path(), "forge", "", &fashion(), "", "")).unwrap();
    text = text.replace(
        r#"plugin = "builtin:resnet"
config = { depth = 18, stem = "imagenet", width = 0.125 }"#,
        &format!("plugin = {model:?}\nconfig = {{ mode = \"escape\" }}"),
    );
    let cfg = dir.path().join("forge.toml");
    std::fs::write(&cfg, text).unwrap();
    let out = dir.path().join("out");
    let assert = benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().failure();
    let output = assert.get_output();
    let shown =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(!shown.contains('\u{1b}'), "no escape sequence reaches the terminal: {shown:?}");

    let cell = record(&out.join("cells/000-forge.json"));
    let failure = &cell.failures[0];
    assert_eq!(failure.plugin.as_deref(), Some(model.as_str()), "{failure:#?}");
    assert_eq!(failure.call.as_deref(), Some("describe"), "{failure:#?}");
    let reason = failure.reason.as_str();
    assert!(
        reason.starts_with(&format!("plugin {model}: `describe` failed: red error: cell failed")),
        "{reason}"
    );
    assert!(!reason.contains('\n') && !reason.contains('\u{1b}'), "{reason:?}");
}

/// The misbehaving model with `mode = quadratic` attends over 65,536
/// tokens: refused at load with the plugin, the node, the estimate and the
/// budget, before burn allocates; the next cell still trains.
#[test]
fn a_graph_whose_attention_would_not_fit_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("misbehave").display().to_string();
    let matrix = "[matrix]\n\"model.config.mode\" = [\"quadratic\", \"ok\"]\n";
    let mut text =
        std::fs::read_to_string(small_config(dir.path(), "quadratic", "", &fashion(), "", matrix)).unwrap();
    text = text.replace(
        r#"plugin = "builtin:resnet"
config = { depth = 18, stem = "imagenet", width = 0.125 }"#,
        &format!("plugin = {model:?}\nconfig = {{ mode = \"ok\" }}"),
    );
    let cfg = dir.path().join("quadratic.toml");
    std::fs::write(&cfg, text).unwrap();
    let out = dir.path().join("out");
    benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).arg("--quiet").assert().failure();

    let refused = record(&out.join("cells/000-mode=quadratic.json"));
    let reason = refused.failures[0].reason.as_str();
    for needle in [
        format!("model {model} would need about "),
        "to train at batch 32 in f32".into(),
        "node `attn` (attention) alone holds ".into(),
        "more than the budget of ".into(),
    ] {
        assert!(reason.contains(&needle), "missing {needle:?} in {reason}");
    }
    assert!(!reason.contains("signal"), "refused, not killed: {reason}");
    let ok = record(&out.join("cells/001-mode=ok.json"));
    assert_eq!(status(&ok), CellStatus::Ok, "{ok:#?}");
}

/// The process ids of `parent`'s children whose command line has `arg`.
fn children(parent: u32, arg: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // The parent pid is the second field after the parenthesised command.
        let ppid = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().nth(1));
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let has_arg = cmdline.split(|&b| b == 0).any(|a| a == arg.as_bytes());
        if ppid == Some(&parent.to_string()) && has_arg {
            found.push(pid);
        }
    }
    found
}

/// A cell process that dies in the engine (here aborted from outside once
/// it trains) is recorded with the model plugin and the last phase it
/// reached, and the run goes on to the next cell.
#[test]
#[cfg(target_os = "linux")]
fn a_cell_that_dies_while_training_names_its_model_and_phase() {
    let dir = tempfile::tempdir().unwrap();
    let matrix = "[matrix]\ninclude = [{ \"train.epochs\" = 60 }, { \"train.epochs\" = 1 }]\n";
    let cfg = small_config(dir.path(), "dies", "", &fashion(), "", matrix);
    let out = dir.path().join("out");
    let mut run = std::process::Command::new(assert_cmd::cargo::cargo_bin("benchkit"))
        .arg("run")
        .arg(&cfg)
        .arg("-o")
        .arg(&out)
        .arg("--quiet")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Once the first epoch is logged, the cell process is training.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let events = out.join("events.jsonl");
    while !std::fs::read_to_string(&events).is_ok_and(|t| t.contains("\"event\":\"epoch\"")) {
        assert!(std::time::Instant::now() < deadline, "no epoch logged in 300 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let cell = children(run.id(), "cell");
    assert_eq!(cell.len(), 1, "one cell process: {cell:?}");
    let killed = std::process::Command::new("kill").arg("-ABRT").arg(cell[0].to_string()).status().unwrap();
    assert!(killed.success());
    run.wait().unwrap();

    let died = record(&out.join("cells/000-epochs=60.json"));
    let failure = &died.failures[0];
    let (reason, phase) = (failure.reason.as_str(), failure.phase.as_deref().unwrap_or_default());
    assert!(reason.contains("signal 6 (SIGABRT: aborted)"), "{reason}");
    assert!(reason.contains(&format!("; last phase: {phase}")), "{reason}");
    assert!(
        ["training model builtin:resnet: epoch ", "evaluating model builtin:resnet after its last"]
            .iter()
            .any(|p| phase.starts_with(p)),
        "{phase}"
    );
    assert_eq!(failure.kind, FailureKind::Deterministic, "a crash is not tried again: {failure:#?}");
    let next = record(&out.join("cells/001-epochs=1.json"));
    assert_eq!(status(&next), CellStatus::Ok, "the run went on: {next:#?}");
}

/// The graph's memory estimate against the cell process's measured peak at
/// the scale users train: ResNet-50 and ViT-B/16 at 224 px, one step at
/// batch 8 and an evaluation pass. Within 2× either way, the budget
/// refuses what does not fit and lets through what does.
#[test]
fn the_memory_estimate_is_within_twice_the_peak_at_imagenet_size() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("estimate.toml");
    std::fs::write(
        &cfg,
        r#"name = "estimate"
seed = 1

[data]
source = "synthetic"
shape = [3, 224, 224]
samples = 8
test_samples = 8
num_classes = 1000

[model]
plugin = "builtin:resnet"

[train]
epochs = 1
batch_size = 8
eval_batch_size = 8
max_steps_per_epoch = 1
warmup_steps = 0

[matrix]
include = [
  { "model.plugin" = "builtin:resnet", "model.config" = { depth = 50 } },
  { "model.plugin" = "builtin:vit", "model.config" = { variant = "base", patch = 16 } },
]
"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).arg("--quiet").assert().success();
    for (cell, params) in [
        ("000-plugin=builtin_resnet,depth=50", 25_557_032),
        ("001-plugin=builtin_vit,variant=base,patch=16", 86_567_656),
    ] {
        let record = record(&out.join(format!("cells/{cell}.json")));
        let repeat = &record.repeats[0];
        assert_eq!(repeat.params, params, "{cell}");
        let estimate = repeat.memory_estimate_mib.expect("an estimate");
        let peak = repeat.peak_rss_mib.expect("a measured peak");
        let ratio = estimate / peak;
        assert!((0.5..=2.0).contains(&ratio), "{cell}: estimated {estimate:.0} MiB, peaked at {peak:.0} MiB");
    }
}
