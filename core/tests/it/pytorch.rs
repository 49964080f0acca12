//! End-to-end: PyTorch as a row of the matrix. A `pytorch` cell is the
//! cell's exported script run by the Python of the torch virtual
//! environment the LibTorch tests run in (`BENCHKIT_PYTHON`); its figures
//! land in the same results as burn's cells', and a Python without torch is
//! refused at `validate`, naming it.
#![cfg(feature = "tch")]

use crate::common;

use common::{benchkit, python, repo, small_config};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn config(dir: &Path, tail: &str) -> PathBuf {
    let data = format!(
        "path = {:?}\ntrain_limit = 128\ntest_limit = 64",
        repo().join("configs/data/fashion-mnist").display().to_string()
    );
    small_config(dir, "engines", "", &data, "epochs = 2\n", tail)
}

#[test]
fn pytorch_is_a_row_of_the_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "[matrix]\nbackend = [\"tch\", \"pytorch\", \"pytorch-compiled\"]\n");
    let out = dir.path().join("out");
    let assert =
        benchkit().env("BENCHKIT_PYTHON", python()).arg("run").arg(&cfg).arg("-o").arg(&out).assert();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert.success();
    let mut cells: Vec<Value> = std::fs::read_dir(out.join("cells"))
        .unwrap()
        .map(|e| serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap())
        .collect();
    cells.sort_by_key(|c| c["repeats"][0]["backend"].as_str().unwrap_or_default().to_string());
    let [torch, compiled, tch] = [&cells[0]["repeats"][0], &cells[1]["repeats"][0], &cells[2]["repeats"][0]];
    let backends = [torch, compiled, tch].map(|c| c["backend"].as_str().unwrap_or_default().to_string());
    assert_eq!(backends, ["pytorch", "pytorch-compiled", "tch"]);
    // The same cell: the same model, batch and steps, whoever trains it.
    for key in ["params", "batch_size", "steps_measured", "precision", "timing"] {
        assert_eq!(torch[key], tch[key], "{key}: {torch}");
        assert_eq!(compiled[key], tch[key], "{key}: {compiled}");
    }
    let name = compiled["engine"]["name"].as_str().unwrap_or_default();
    assert!(name.starts_with("pytorch 2.") && name.ends_with("compiled"), "{compiled}");
    assert!(compiled["images_per_s"].as_f64().is_some_and(|s| s > 0.0), "{compiled}");
    let ips = torch["images_per_s"].as_f64().unwrap_or(f64::NAN);
    assert!(ips > 0.0 && ips.is_finite(), "{torch}");
    assert!(torch["step_ms"]["p50"].as_f64().is_some_and(|p| p > 0.0), "{torch}");
    assert_eq!(torch["epochs"].as_array().map(Vec::len), Some(2), "{torch}");
    assert!(torch["epochs"][1]["train_loss"].as_f64().is_some_and(f64::is_finite), "{torch}");
    assert!(torch["peak_rss_mib"].as_f64().is_some_and(|m| m > 0.0), "{torch}");
    // Its epochs evaluate as burn's do, so an epoch's time (and cost) holds both.
    for row in [torch, tch] {
        let eval = row["epochs"][0]["eval_s"].as_f64().unwrap_or(0.0);
        assert!(eval > 0.0 && row["eval_s"].as_f64().unwrap_or(0.0) >= eval, "{row}");
    }
    // The threads each engine computed with, PyTorch's and LibTorch's alike.
    assert!(torch["threads"].as_u64().is_some_and(|t| t >= 1), "{torch}");
    assert!(tch["threads"].as_u64().is_some_and(|t| t >= 1), "{tch}");
    // Synthetic data of the cell's shape: said, and no accuracy passed off as the data's.
    let engine = &torch["engine"];
    assert!(
        engine["name"].as_str().is_some_and(|n| n.starts_with("pytorch 2.") && n.ends_with("eager")),
        "{engine}"
    );
    assert!(engine["device"].as_str().is_some_and(|d| d.starts_with("cpu (")), "{engine}");
    assert!(engine["data"].as_str().is_some_and(|d| d.contains("not its idx data")), "{engine}");
    assert!(torch["final_test_accuracy"].is_null(), "{torch}");
    assert!(tch["engine"].is_null(), "{tch}");
    assert!(
        stdout.contains("trained on synthetic images") && stdout.contains("its accuracy is not measured"),
        "{stdout}"
    );
}

#[test]
fn a_python_without_torch_is_refused_at_validate() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "[matrix]\nbackend = [\"flex\", \"pytorch\"]\n");
    let other = tempfile::tempdir().unwrap();
    let alone = config(other.path(), "[matrix]\nbackend = [\"pytorch\"]\n");
    for (python, says) in
        [("/nonexistent/python", "cannot run /nonexistent/python"), ("/bin/true", "cannot import torch")]
    {
        // Beside a cell that can run, the PyTorch row is listed as not available.
        let assert = benchkit().env("BENCHKIT_PYTHON", python).arg("validate").arg(&cfg).assert().success();
        let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
        assert!(stdout.contains("not available: backend \"pytorch\"") && stdout.contains(says), "{stdout}");
        assert!(stdout.contains("1 of them not available here"), "{stdout}");
        // Alone, the config is refused at its line.
        let assert = benchkit().env("BENCHKIT_PYTHON", python).arg("validate").arg(&alone).assert().failure();
        let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
        assert!(
            stderr.contains(says) && stderr.contains("BENCHKIT_PYTHON") && stderr.contains("torch-venv.sh"),
            "{stderr}"
        );
        assert!(
            stderr.contains("engines.toml:") && stderr.contains("backend"),
            "names the file and key: {stderr}"
        );
    }
    // Several workers have no PyTorch cell: DDP runs under torchrun.
    let two = config(dir.path(), "[matrix]\nbackend = [\"pytorch\"]\ndevices = [2]\n");
    let assert = benchkit().env("BENCHKIT_PYTHON", python()).arg("validate").arg(&two).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("trains one replica in one process") && stderr.contains("torchrun"), "{stderr}");

    // torch.compile on the CPU needs a C++ compiler: none on PATH, none set.
    let compiled = config(dir.path(), "[matrix]\nbackend = [\"pytorch-compiled\"]\n");
    let empty = tempfile::tempdir().unwrap();
    let assert = benchkit()
        .env("BENCHKIT_PYTHON", python())
        .env("PATH", empty.path())
        .env_remove("CXX")
        .arg("validate")
        .arg(&compiled)
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("a C++ compiler") && stderr.contains("set CXX"), "{stderr}");
}

/// The cell's memory limit holds its Python too: torch alone needs more
/// than 128 MiB, so the cell fails as out of memory, and says so.
#[test]
fn a_pytorch_cell_is_held_to_the_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let data = format!(
        "path = {:?}\ntrain_limit = 128\ntest_limit = 64",
        repo().join("configs/data/fashion-mnist").display().to_string()
    );
    let cfg = small_config(
        dir.path(),
        "held",
        "",
        &data,
        "memory_limit_mib = 128\n",
        "[matrix]\nbackend = [\"pytorch\"]\n",
    );
    let out = dir.path().join("out");
    let assert =
        benchkit().env("BENCHKIT_PYTHON", python()).arg("run").arg(&cfg).arg("-o").arg(&out).assert();
    let output = assert.get_output();
    let text =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(
        text.contains("out of memory")
            && text.contains("with its children's")
            && text.contains("train.memory_limit_mib"),
        "{text}"
    );
}

/// `compare` between a LibTorch run and a PyTorch run of the same cell
/// shows the ratio and says the engines differ, judging nothing.
#[test]
fn compare_across_backends_judges_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = "source = \"synthetic\"\nshape = [1, 28, 28]\nnum_classes = 10";
    let mut runs = Vec::new();
    for backend in ["tch", "pytorch"] {
        let sub = dir.path().join(backend);
        std::fs::create_dir(&sub).unwrap();
        let cfg = small_config(
            &sub,
            "engines",
            &format!("backend = \"{backend}\""),
            data,
            "max_steps_per_epoch = 4\n",
            "",
        );
        let out = sub.join("out");
        benchkit()
            .env("BENCHKIT_PYTHON", python())
            .args(["run", "-q", "-o"])
            .arg(&out)
            .arg(&cfg)
            .assert()
            .success();
        runs.push(out);
    }
    let assert = benchkit().arg("compare").arg(&runs[0]).arg(&runs[1]).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(stdout.contains("not alike: backend tch → pytorch"), "{stdout}");
    assert!(!stdout.contains("REGRESSION") && !stdout.contains("faster"), "{stdout}");
}

/// The one-command engine comparison validates where torch is installed
/// (elsewhere its PyTorch cells stop validation before the cells are prepared).
#[test]
fn the_engine_comparison_config_is_valid() {
    let cfg = repo().join("configs/backends.toml");
    let assert = benchkit().env("BENCHKIT_PYTHON", python()).arg("validate").arg(&cfg).assert();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert.success();
    assert!(stderr.is_empty() || !stderr.contains("error"), "{stderr}");
}

/// burn's own kernels, LibTorch's and PyTorch eager, op-profiled on one
/// graph: every backend's step is accounted for op by op, their rows carry
/// the same node names, and the gap table sets each against PyTorch.
#[test]
fn backends_line_up_op_by_op() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = crate::ops::config(dir.path(), "[matrix]\nbackend = [\"flex\", \"tch\", \"pytorch\"]\n");
    let out = dir.path().join("out");
    let assert =
        benchkit().env("BENCHKIT_PYTHON", python()).arg("run").arg(&cfg).arg("-o").arg(&out).assert();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert.success();
    let records = common::records(&out);
    let profiles: Vec<&benchkit_schema::OpProfile> =
        records.iter().map(|r| r.repeats[0].ops.as_ref().expect("an op profile")).collect();
    let names = |p: &benchkit_schema::OpProfile| p.rows.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
    for p in &profiles {
        crate::ops::check_profile(p, &["conv1", "layer1.0.conv1", "fc"]);
        assert_eq!(names(p), names(profiles[0]), "every backend's rows are the graph's nodes");
    }
    let summaries = common::run_summary(&out).summaries;
    let cells: Vec<&benchkit_schema::CellSummary> = summaries.iter().collect();
    let groups = benchkit_schema::ops::backend_groups(&cells, None);
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0][0].backend.as_deref(), Some("pytorch"), "PyTorch eager is the reference");
    assert!(
        stdout.contains("reference pytorch")
            && stdout.contains("flex share of gap")
            && stdout.contains("tch against pytorch"),
        "{stdout}"
    );
}
