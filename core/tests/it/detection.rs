//! End-to-end detection: the VOC sample written by `benchkit data
//! detection-sample` from the shipped Fashion-MNIST subset, a light SSD
//! trained on it by the real binary with builtin:ssd-augment on one and two
//! devices, its mAP, precision, recall and precision–recall curve in the
//! results; and the mismatches between data, transform and model failing
//! with what to change.

use crate::common;

use common::{benchkit, detection_sample, repo};
use serde_json::Value;
use std::path::Path;

fn sample(dir: &Path) -> std::path::PathBuf {
    detection_sample(dir, 96, 24, 160)
}

fn config(dir: &Path, name: &str, voc: &str, transform: &str, model: &str, tail: &str) -> std::path::PathBuf {
    let text = format!(
        r#"name = "{name}"
seed = 5

[data]
source = "{source}"
path = {voc:?}
resize = [160, 160]

[transform]
plugin = "{transform}"

[model]
plugin = "{model}"
config = {model_config}

[train]
epochs = 3
batch_size = 16
lr = 0.01
warmup_steps = 1
max_steps_per_epoch = 5
hit_iou = 0.2
hit_score = 0.3

[[reporters]]
plugin = "builtin:json"

[[reporters]]
plugin = "builtin:html"
{tail}
"#,
        source = if voc.contains("fashion") { "idx" } else { "voc" },
        model_config = if model == "builtin:ssd" {
            r#"{ backbone = "resnet", depth = 18, width = 0.25, size = 160 }"#
        } else {
            r#"{ depth = 18, width = 0.25 }"#
        },
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn cells(out: &Path) -> Vec<Value> {
    std::fs::read_dir(out.join("cells"))
        .unwrap()
        .map(|e| serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap())
        .collect()
}

#[test]
fn a_light_ssd_learns_on_the_voc_sample_and_reports_map() {
    let dir = tempfile::tempdir().unwrap();
    let voc = sample(dir.path());
    let voc = voc.display().to_string();
    let cfg =
        config(dir.path(), "ssd", &voc, "builtin:ssd-augment", "builtin:ssd", "[matrix]\ndevices = [1, 2]\n");
    let out = dir.path().join("out");
    let assert = benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert.success();
    assert!(stdout.contains("test acc is the mAP@0.5"), "{stdout}");
    let cells = cells(&out);
    assert_eq!(cells.len(), 2, "{stdout}");
    for cell in &cells {
        let repeat = &cell["repeats"][0];
        assert_eq!(repeat["accuracy_metric"], "mAP@0.5");
        let epochs = repeat["epochs"].as_array().unwrap();
        assert_eq!(epochs.len(), 3);
        let loss = |e: &Value| e["train_loss"].as_f64().unwrap();
        assert!(loss(&epochs[2]) < loss(&epochs[0]), "the loss falls: {repeat}");
        for e in epochs {
            let map = e["test_accuracy"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&map), "{e}");
            let metrics = e["metrics"].as_object().unwrap();
            assert!(metrics.keys().any(|k| k.starts_with("ap.")), "{e}");
            assert_eq!(metrics["hit_iou"].as_f64(), Some(0.2));
            assert!(metrics["recall"].as_f64().is_some_and(|r| (0.0..=1.0).contains(&r)), "{e}");
            let curve = e["pr_curve"].as_array().unwrap();
            assert_eq!(curve.len(), 101);
            assert_eq!(curve[100][0].as_f64(), Some(1.0));
        }
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Precision–recall"), "the report draws the curves");
}

#[test]
fn detection_mismatches_fail_with_what_to_change() {
    let dir = tempfile::tempdir().unwrap();
    let voc = sample(dir.path()).display().to_string();
    let run = |name: &str, data: &str, transform: &str, model: &str| -> String {
        let cfg = config(dir.path(), name, data, transform, model, "");
        let out = dir.path().join(name);
        let assert = benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().code(1);
        let output = assert.get_output();
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
    };
    let text = run("classifier", &voc, "builtin:ssd-augment", "builtin:resnet");
    assert!(text.contains("has boxes") && text.contains("builtin:ssd"), "{text}");
    let text = run("no-boxes-moved", &voc, "builtin:imagenet", "builtin:ssd");
    assert!(
        text.contains("returned boxes for 0 of 16 images") && text.contains("builtin:ssd-augment"),
        "{text}"
    );
    let idx = repo().join("configs/data/fashion-mnist").display().to_string();
    let text = run("no-boxes", &idx, "builtin:ssd-augment", "builtin:ssd");
    assert!(text.contains("is a detector, but data") && text.contains("voc"), "{text}");
}
