//! End-to-end: pipeline-parallel cells run by the real binary on
//! CIFAR-10-format data, beside a single-device cell of the same matrix:
//! the stages' report (bubble, per-stage time, activation memory), the
//! terminal and Markdown tables, and a balance that does not fit the model
//! failing its cell clearly while the others stand.

use crate::common;

use benchkit_schema::{CellRecord, CellStatus};
use common::{benchkit, records, small_config};
use std::collections::BTreeMap;
use std::path::Path;

/// CIFAR-10 binaries of 32×32 RGB images whose class sets which quarter
/// of the image is bright: 320 training and 100 test records.
fn write_cifar(dir: &Path) {
    let record = |i: usize| -> Vec<u8> {
        let class = (i * 7) % 4;
        let mut r = vec![class as u8];
        for channel in 0..3 {
            for y in 0..32 {
                for x in 0..32 {
                    let quarter = (y / 16) * 2 + x / 16;
                    let noise = ((i * 31 + y * 7 + x * 3 + channel * 11) % 40) as u8;
                    r.push(if quarter == class { 180 + noise } else { 30 + noise });
                }
            }
        }
        r
    };
    for k in 0..5 {
        let bytes: Vec<u8> = (k * 64..(k + 1) * 64).flat_map(record).collect();
        std::fs::write(dir.join(format!("data_batch_{}.bin", k + 1)), bytes).unwrap();
    }
    std::fs::write(dir.join("test_batch.bin"), (1000..1100).flat_map(record).collect::<Vec<u8>>()).unwrap();
}

#[test]
fn pipeline_cells_report_their_stages_beside_one_device() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("cifar");
    std::fs::create_dir(&data).unwrap();
    write_cifar(&data);
    let cfg = small_config(
        dir.path(),
        "gpipe",
        "[distributed]\nthreads_per_device = 1",
        &format!("source = \"cifar10\"\npath = {:?}", data.display().to_string()),
        "lr = 0.05",
        r#"[[reporters]]
plugin = "builtin:markdown"

[matrix]
include = [
  { devices = 1 },
  { "distributed.stages" = 2, "distributed.micro_batches" = 4, "distributed.checkpoint" = "never" },
  { "distributed.stages" = 2, "distributed.micro_batches" = 4, "distributed.checkpoint" = "always" },
  { "distributed.stages" = 2, "distributed.balance" = [1, 1] },
]
"#,
    );
    // A CIFAR stem and three-channel normalisation for 32×32 RGB.
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("stem = \"imagenet\"", "stem = \"cifar\"")
        .replace("mean = [0.286], std = [0.353]", "mean = [0.3, 0.3, 0.3], std = [0.3, 0.3, 0.3]");
    std::fs::write(&cfg, text).unwrap();
    let out = dir.path().join("out");
    let assert = benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().code(1);
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(out.join("cells").is_dir(), "{stdout}\n{stderr}");
    let cells: BTreeMap<String, CellRecord> =
        records(&out).into_iter().map(|r| (r.cell.clone(), r)).collect();
    assert_eq!(cells.len(), 4, "{stdout}");
    let failed = &cells["stages=2,balance=[1,1]"];
    assert_eq!(failed.summary.as_ref().map(|s| s.status), Some(CellStatus::Failed));
    let why = &failed.failures[0].reason;
    assert!(why.contains("distributed.balance [1, 1]") && why.contains("nodes in all"), "{why}");

    let single = &cells["devices=1"].repeats[0];
    assert!(single.pipeline.is_none());
    let repeat = |name: &str| cells[name].repeats[0].clone();
    let never = repeat("stages=2,micro_batches=4,checkpoint=never");
    let always = repeat("stages=2,micro_batches=4,checkpoint=always");
    for r in [&never, &always] {
        let p = r.pipeline.as_ref().expect("a pipeline report");
        assert_eq!((p.stages, p.micro_batches, p.micro_batch), (2, 4, 8));
        assert!((p.ideal_bubble - 0.2).abs() < 1e-9, "{p:?}");
        assert!(p.measured_bubble > 0.0 && p.measured_bubble < 1.0, "{p:?}");
        assert!(p.per_stage.iter().all(|s| s.busy_ms > 0.0), "{p:?}");
        let params: usize = p.per_stage.iter().map(|s| s.params).sum();
        assert_eq!(params, r.params, "the stages hold every parameter");
        assert!(p.per_stage[0].activation_mib > p.per_stage[0].rematerialised_mib);
        assert_eq!(r.parallel.replicas, 1);
    }
    // Re-materialisation recomputes the same values: the same training.
    let (a, b) = (never.final_test_accuracy, always.final_test_accuracy);
    assert!((a - b).abs() < 1e-9, "{a} vs {b}");
    assert!(single.final_test_accuracy > 0.0);

    assert!(stdout.contains("pipeline stages") && stdout.contains("2 × 4 (8 images)"), "{stdout}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let section = md.split("## Pipeline stages").nth(1).expect("a pipeline section");
    assert!(section.contains("| always |") && section.contains("(20 %)"), "{section}");
}
