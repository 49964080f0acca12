//! End-to-end: `benchkit advise` on real runs. An input-bound cell (a
//! folder of 224 px JPEGs decoded on the step thread) is advised a loader
//! worker, and `--verify` measures it within 20 % of the prediction with
//! the data wait gone; a communication-bound cell (two ranks over an
//! emulated 100 Mbit/s link) is advised a larger batch, measured the same
//! way; a compute-bound cell is advised nothing; a failed cell, an
//! unprofiled one, a `--mock` run and a run of another schema each say
//! what advice is possible and why. Results are read through the schema's
//! types.
//!
//! The two `--verify` tests time a change against a prediction, so they
//! must have the machine to themselves: they are ignored in the parallel
//! run and CI runs them alone (`-- --ignored --test-threads=1 advise::`).

use crate::common;

use benchkit_schema::{AdviceReport, ChangeKind};
use common::{benchkit, repo, small_config};
use std::path::Path;

fn advice(out: &Path) -> AdviceReport {
    let path = out.join("advice.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `train` and `test` images of 224x224 RGB noise over a class's shade,
/// four classes, as JPEG files in `dir/<split>/<class>/`.
fn jpeg_folder(dir: &Path, train: usize, test: usize) {
    let mut state = 0x2545_f491_u32;
    for (split, count) in [("train", train), ("test", test)] {
        for class in 0..4u32 {
            let folder = dir.join(split).join(format!("c{class}"));
            std::fs::create_dir_all(&folder).unwrap();
            for i in 0..count / 4 {
                let image = image::RgbImage::from_fn(224, 224, |_, _| {
                    let mut channel = || {
                        state ^= state << 13;
                        state ^= state >> 17;
                        state ^= state << 5;
                        (class * 50 + state % 80) as u8
                    };
                    image::Rgb([channel(), channel(), channel()])
                });
                image.save(folder.join(format!("{i}.jpg"))).unwrap();
            }
        }
    }
}

fn advise(out: &Path, extra: &[&str]) -> String {
    let assert = benchkit().arg("advise").arg(out).args(extra).assert().success();
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

#[test]
#[ignore = "times a change against its prediction: run alone (CI's `alone` phase)"]
fn an_input_bound_cell_is_advised_a_loader_worker_and_measured_within_a_fifth() {
    let dir = tempfile::tempdir().unwrap();
    jpeg_folder(&dir.path().join("images"), 256, 32);
    let data = "source = \"folder\"\npath = \"images\"\nresize = 32\npipeline = \"naive\"";
    let cfg = small_config(
        dir.path(),
        "input",
        "[distributed]\nthreads_per_device = 1",
        data,
        "max_steps_per_epoch = 10\nprofile = true",
        "",
    );
    // The step thread decodes 224 px JPEGs and runs the ImageNet crop; a
    // one-block ViT on 32 px computes about five times as long.
    let text = std::fs::read_to_string(&cfg).unwrap();
    let text = text
        .replace("builtin:normalize", "builtin:imagenet")
        .replace("config = { mean = [0.286], std = [0.353] }\n", "")
        .replace("builtin:resnet", "builtin:vit")
        .replace(
            "config = { depth = 18, stem = \"imagenet\", width = 0.125 }",
            "config = { variant = \"tiny\", patch = 8, depth = 1, mlp_ratio = 1 }",
        );
    std::fs::write(&cfg, text).unwrap();
    let out = dir.path().join("out");
    benchkit().current_dir(dir.path()).arg("run").arg(&cfg).arg("-o").arg(&out).assert().success();
    // The results directory is enough on its own: the config is gone, and
    // advise runs from another folder than the run did.
    std::fs::remove_file(&cfg).unwrap();

    let stdout = advise(&out, &["--verify"]);
    eprintln!("{stdout}");
    let report = advice(&out);
    let cell = &report.cells[0];
    assert!(cell.measured.data_wait_pct > 5.0, "the cell waits for data: {stdout}");
    let change = &cell.advised[0];
    assert_eq!(change.kind, ChangeKind::LoaderWorkers, "{stdout}");
    assert_eq!(change.set["data.pipeline"], "optimized");
    assert!(
        change.uses.iter().any(|u| u.contains("decode")),
        "it names the stages it used: {:?}",
        change.uses
    );
    let verified = change.verified.as_ref().expect("measured");
    assert!(verified.error_pct.abs() <= 20.0, "predicted within 20 %: {stdout}");
    assert!(verified.measured.data_wait_pct < 5.0, "the data wait is gone: {stdout}");
    assert!(cell.remeasured.is_some(), "the cell as it ran is measured beside the change");
    assert!(stdout.contains("verified:") && stdout.contains("within 20 % of the prediction"), "{stdout}");
    assert!(out.join("advice.toml").is_file() && out.join("advice-run/run.json").is_file());
    let html = std::fs::read_to_string(out.join("advice.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("data wait"), "the decomposition is drawn");

    // Advised again without --verify, what was measured is read again, not dropped.
    advise(&out, &[]);
    let again = advice(&out);
    assert_eq!(again.cells[0].advised[0].verified, change.verified, "the measurement is kept");
}

#[test]
#[ignore = "times a change against its prediction: run alone (CI's `alone` phase)"]
fn a_communication_bound_cell_is_advised_a_larger_batch_and_measured_within_a_fifth() {
    let Some(_one) = common::shaping() else { return };
    let dir = tempfile::tempdir().unwrap();
    let data = format!(
        "source = \"idx\"\npath = \"{}\"\ntrain_limit = 2048\ntest_limit = 64",
        repo().join("configs/data/fashion-mnist").display()
    );
    // The figures the prediction starts from are measured as its check is:
    // 3 repeats round by round, 20 steps each.
    let top = "repeats = 3\ninterleave_repeats = true\n[distributed]\nprocesses = 2\nthreads_per_device = 1\nlink = \"100mbit\"";
    let train = "batch_size = 8\nmax_steps_per_epoch = 20\nprofile = true";
    let matrix = "[matrix]\n\"train.batch_size\" = [16, 64]\n";
    let cfg = small_config(dir.path(), "comm", top, &data, train, matrix);
    let out = dir.path().join("out");
    benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().success();

    let stdout = advise(&out, &["--verify", "--cell", "0"]);
    eprintln!("{stdout}");
    let report = advice(&out);
    let cell = &report.cells[0];
    assert!(cell.measured.exposed_communication_pct > 20.0, "communication-bound: {stdout}");
    let change = cell.advised.iter().find(|c| c.kind == ChangeKind::Batch).expect("a larger batch advised");
    assert!(
        change.uses.iter().any(|u| u.contains("over 2 cells")),
        "the line through both batches: {stdout}"
    );
    assert!(change.set.contains_key("train.lr"), "the learning rate follows the linear rule");
    let verified = change.verified.as_ref().expect("measured");
    assert!(verified.error_pct.abs() <= 20.0, "predicted within 20 %: {stdout}");
    assert!(
        verified.measured.exposed_communication_pct < cell.measured.exposed_communication_pct,
        "the exposed share falls: {stdout}"
    );
}

#[test]
fn a_compute_bound_cell_is_advised_nothing_and_a_failed_one_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let data =
        "source = \"synthetic\"\nnum_classes = 10\nshape = [1, 28, 28]\nsamples = 256\ntest_samples = 32";
    let matrix = "[matrix]\n\"model.config.depth\" = [99, 18]\n";
    let cfg = small_config(dir.path(), "compute", "", data, "", matrix);
    let out = dir.path().join("out");
    benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().failure();

    let stdout = advise(&out, &[]);
    assert!(stdout.contains("nothing here is worth changing"), "{stdout}");
    let report = advice(&out);
    assert_eq!(report.cells.len(), 1);
    assert!(report.cells[0].advised.is_empty(), "{stdout}");
    assert!(report.cells[0].notes.iter().any(|n| n.contains("not profiled")), "{stdout}");
    assert!(!report.cells[0].decomposition.profiled);
    let refused = &report.refused[0];
    assert!(refused.cell.contains("depth=99") && refused.why.contains("it failed"), "{refused:?}");
    assert!(refused.why.contains("got 99"), "the failure's reason: {refused:?}");
    assert!(report.follow_up.is_none() && !out.join("advice.toml").exists(), "nothing to follow up");

    let assert = benchkit().arg("advise").arg(&out).args(["--cell", "nope"]).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("no cell `nope`") && stderr.contains("depth=18"), "{stderr}");

    // A results directory whose advice-run is a link elsewhere is not followed.
    std::os::unix::fs::symlink(dir.path(), out.join("advice-run")).unwrap();
    let assert = benchkit().arg("advise").arg(&out).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("advice-run is not a directory benchkit made"), "{stderr}");
    std::fs::remove_file(out.join("advice-run")).unwrap();

    // A run another schema wrote is refused, naming its version.
    let run = out.join("run.json");
    let text = std::fs::read_to_string(&run).unwrap();
    let schema = format!("\"schema\": \"{}\"", benchkit_schema::SCHEMA_VERSION);
    assert!(text.contains(&schema), "{text:.200}");
    std::fs::write(&run, text.replace(&schema, "\"schema\": \"3.0.0\"")).unwrap();
    let assert = benchkit().arg("advise").arg(&out).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("3.0.0"), "{stderr}");
}

#[test]
fn a_mock_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_config(dir.path(), "mock", "", "source = \"synthetic\"", "", "");
    let out = dir.path().join("out");
    benchkit().arg("run").arg("--mock").arg(&cfg).arg("-o").arg(&out).assert().success();
    let assert = benchkit().arg("advise").arg(&out).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("--mock run") && stderr.contains("invented"), "{stderr}");
    assert!(!out.join("advice.json").exists());
}
