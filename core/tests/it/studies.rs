//! End-to-end: a study config makes its missing data, runs, and sets each
//! claim against what it measured; a check that names no axis or no
//! metric is refused at its line; and every config shipped in configs/
//! and configs/studies/ is valid (the GPU ones up to their backend).

use crate::common;

use common::{benchkit, repo};
use serde_json::Value;
use std::path::Path;

/// A loader-only study over PNG files and shards made from the shipped
/// Fashion-MNIST subset into `dir`.
fn study(dir: &Path, checks: &str) -> std::path::PathBuf {
    let idx = repo().join("configs/data/fashion-mnist");
    let text = format!(
        r#"name = "tiny-study"
seed = 1
mode = "loader-only"

[data]
path = "png"
train_limit = 256
test_limit = 64

[transform]
plugin = "builtin:normalize"
config = {{ mean = [0.286], std = [0.353] }}

[model]
plugin = "builtin:lenet"

[train]
epochs = 1
batch_size = 32
warmup_steps = 1

[matrix]
"data.path" = ["png", "shards"]
"data.pipeline" = ["naive", "optimized"]

[study]
title = "A tiny pipeline study"
question = "Do shards beat files?"
claim = "They do."
prepare = [
  {{ make = "image-folder", from = {idx:?}, to = "png" }},
  {{ make = "shards", from = "png", to = "shards" }},
]
{checks}
"#,
        idx = idx.display().to_string()
    );
    let path = dir.join("study.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_study_makes_its_data_runs_and_judges_each_claim() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = study(
        dir.path(),
        r#"
[[study.checks]]
says = "the optimized loader is at least as fast"
metric = "images_per_s"
cells = { "data.pipeline" = "optimized" }
against = { "data.pipeline" = "naive" }
at_least = 0.01

[[study.checks]]
says = "no pipeline delivers a million images a second"
metric = "images_per_s"
at_least = 1000000.0

[[study.checks]]
says = "the GPU stays busy"
metric = "gpu_util_pct"
at_least = 50.0
"#,
    );
    let out = dir.path().join("out");
    let assert = benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().success();
    let output = assert.get_output();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        stderr.contains("study data: making") && dir.path().join("shards/manifest.json").is_file(),
        "{stderr}"
    );
    assert!(!dir.path().join("png.partial").exists());
    assert!(
        stdout.contains("study: A tiny pipeline study") && stdout.contains("claim:    They do."),
        "{stdout}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let verdict = |says: &str| {
        lines
            .iter()
            .find(|l| l.contains(says))
            .map(|l| l.split_whitespace().next().unwrap_or(""))
            .unwrap_or("")
    };
    assert_eq!(verdict("the optimized loader is at least as fast"), "agrees", "{stdout}");
    assert_eq!(verdict("no pipeline delivers"), "DISAGREES", "{stdout}");
    assert_eq!(verdict("the GPU stays busy"), "not", "{stdout}");

    let judged: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("study.json")).unwrap()).unwrap();
    let checks = judged["checks"].as_array().unwrap();
    assert_eq!(checks[0]["figures"].as_array().unwrap().len(), 2, "one ratio per data.path: {judged}");
    assert_eq!(checks[1]["figures"].as_array().unwrap().len(), 4, "{judged}");
    assert_eq!(checks[2]["verdict"], "not-measured");

    // The stored run renders the same verdicts again.
    let assert = benchkit().arg("report").arg(&out).assert().success();
    let again = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(again.contains("DISAGREES") && again.contains("study: A tiny pipeline study"), "{again}");
}

#[test]
fn checks_that_name_no_axis_or_metric_are_refused_at_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let check = |body: &str| {
        let cfg = study(dir.path(), body);
        let assert = benchkit().arg("validate").arg(&cfg).assert().failure();
        String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
    };
    let e = check("[[study.checks]]\nsays = \"x\"\nmetric = \"images_per_s\"\ncells = { devices = 2 }\nat_least = 1.0\n");
    assert!(e.contains("study.checks[0]") && e.contains("\"devices\" is not an axis"), "{e}");
    assert!(e.contains("\"data.path\"") && e.contains("\"data.pipeline\""), "lists the axes: {e}");
    let good = "[[study.checks]]\nsays = \"x\"\nmetric = \"images_per_s\"\nat_least = 1.0\n";
    let e = check(&format!("{good}\n[[study.checks]]\nsays = \"y\"\nmetric = \"images_per_s\"\ncells = {{ devices = 2 }}\nat_least = 1.0\n"));
    assert!(e.contains("study.checks[1]") && e.contains("study.toml:39"), "the second check's line: {e}");
    let e = check("[[study.checks]]\nsays = \"x\"\nmetric = \"speed\"\nat_least = 1.0\n");
    assert!(
        e.contains("study.toml:36")
            && e.contains("unknown metric \"speed\"")
            && e.contains("\"images_per_s\""),
        "{e}"
    );
    let e = check("[[study.checks]]\nsays = \"x\"\nmetric = \"images_per_s\"\n");
    assert!(e.contains("needs at_least, at_most or both"), "{e}");
}

#[test]
fn every_shipped_config_is_valid() {
    // The studies first: they make the data that other configs read.
    let mut configs = Vec::new();
    for dir in ["configs/studies", "configs"] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                configs.push(path);
            }
        }
    }
    assert!(configs.len() >= 20, "{configs:?}");
    for path in configs {
        // A recipe for the user's own folder, which is not shipped: its keys
        // are checked here, and book.rs runs it on a folder of real images.
        let recipe = path.ends_with("configs/own-images.toml");
        let args: &[&str] = if recipe { &["validate", "--config-only"] } else { &["validate"] };
        let assert = benchkit().args(args).arg(&path).assert();
        let output = assert.get_output();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let gpu_only = stderr.contains("needs benchkit built with `--features");
        // PyTorch cells need a Python with torch, which only some machines have.
        let no_torch = stderr.contains("backend \"pytorch") && stderr.contains("(BENCHKIT_PYTHON)");
        // Emulated links need root and iproute2, which CI has (BENCHKIT_REQUIRE_NETNS).
        let no_netns = stderr.contains("network namespace of its own")
            && std::env::var_os("BENCHKIT_REQUIRE_NETNS").is_none();
        assert!(output.status.success() || gpu_only || no_torch || no_netns, "{}: {stderr}", path.display());
    }
}
