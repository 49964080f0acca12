//! End-to-end on burn's `wgpu` backend (`--features wgpu`), through the real
//! binary on Vulkan (Mesa's lavapipe on a machine without a GPU): a matrix
//! whose first cell compiles and tunes every kernel and whose second finds
//! them kept, compile time apart from the steady step; a damaged kernel
//! cache discarded, not trusted; a machine without a Vulkan driver refused
//! before anything trains. Skipped where wgpu finds no adapter, unless
//! `BENCHKIT_REQUIRE_VULKAN` is set.
#![cfg(feature = "wgpu")]

use crate::common::{benchkit, cache, repo, small_config};
use benchkit_schema::{CellRecord, CellResult, WarmupEnd};
use std::path::Path;

/// Whether this machine has a Vulkan adapter, asked of `benchkit validate`;
/// without one the test says it was skipped, or fails where one is required.
fn vulkan(config: &Path) -> bool {
    let out = benchkit().arg("validate").arg(config).output().expect("benchkit validate");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        return true;
    }
    assert!(
        stderr.contains("backend \"wgpu\" found no"),
        "validate failed for another reason than a missing Vulkan: {stderr}"
    );
    assert!(
        std::env::var_os("BENCHKIT_REQUIRE_VULKAN").is_none(),
        "BENCHKIT_REQUIRE_VULKAN is set, but: {stderr}"
    );
    benchkit::skip::record(&format!(
        "no Vulkan adapter here ({}); install mesa-vulkan-drivers (BENCHKIT_REQUIRE_VULKAN=1 makes this an error)",
        stderr.trim()
    ));
    false
}

/// Every cell's records, in the run's order, read through the schema's types.
fn cells(out: &Path) -> Vec<CellRecord> {
    let mut paths: Vec<_> =
        std::fs::read_dir(out.join("cells")).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    paths.iter().map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()).collect()
}

fn first(record: &CellRecord) -> &CellResult {
    record.repeats.first().unwrap_or_else(|| panic!("{} has no repeat: {:?}", record.cell, record.failures))
}

const DATA: &str = "source = \"idx\"\npath = \"DATA\"";
const TRAIN: &str =
    "epochs = 2\nbatch_size = 32\nwarmup_steps = 2\nmax_steps_per_epoch = 30\nmax_warmup_steps = 25";

fn config(dir: &Path, name: &str, tail: &str) -> std::path::PathBuf {
    config_with(dir, name, TRAIN, tail)
}

fn config_with(dir: &Path, name: &str, train: &str, tail: &str) -> std::path::PathBuf {
    let data = DATA.replace("DATA", &repo().join("configs/data/fashion-mnist").display().to_string());
    small_config(dir, name, "backend = \"wgpu\"", &data, train, tail)
}

#[test]
fn a_wgpu_matrix_trains_cold_then_warm_with_its_kernels_kept_and_a_damaged_cache_discarded() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "jit",
        "[matrix]\n\"train.lr\" = [0.1, 0.05]\ninclude = [{ backend = \"flex\", \"train.lr\" = 0.1 }]",
    );
    if !vulkan(&cfg) {
        return;
    }
    // Only this test keeps kernels: start it cold.
    benchkit().args(["kernels", "clear"]).assert().success();
    let out = dir.path().join("out");
    let run = benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("compile s"), "the table shows compile time: {stdout}");
    let records = cells(&out);
    let [cold, warm, flex] = [first(&records[0]), first(&records[1]), first(&records[2])];
    assert_eq!(
        (cold.backend.as_str(), warm.backend.as_str(), flex.backend.as_str()),
        ("wgpu", "wgpu", "flex")
    );
    let (cj, wj) = (cold.jit.as_ref().expect("cold jit"), warm.jit.as_ref().expect("warm jit"));
    assert!(flex.jit.is_none());
    assert_eq!((cj.cache.as_str(), wj.cache.as_str()), ("cold", "warm"), "{cj:?}\n{wj:?}");
    assert_eq!(cj.engine, "cubecl-wgpu");
    assert!(!cj.device.is_empty() && cj.device == wj.device, "{cj:?}");
    assert!(cj.warmup_compiled > 0, "the cold cell compiled its kernels: {cj:?}");
    assert_eq!(wj.warmup_compiled, 0, "the warm cell found every kernel kept: {wj:?}");
    assert_eq!(wj.warmup_tuned, 0, "and every tuning result: {wj:?}");
    for (r, j) in [(cold, cj), (warm, wj)] {
        assert_eq!(
            (j.measured_compiled, j.measured_tuned),
            (0, 0),
            "{}: no measured step compiled: {j:?}",
            r.cell
        );
        assert!(
            matches!(r.warmup.ended, Some(WarmupEnd::Steady | WarmupEnd::Limit)),
            "{}: {:?}",
            r.cell,
            r.warmup
        );
        assert!(r.steps_measured >= 10, "{}: {} measured steps", r.cell, r.steps_measured);
        let losses: Vec<f64> = r.epochs.iter().map(|e| e.train_loss).collect();
        assert!(losses[1] < losses[0], "{}: the loss falls: {losses:?}", r.cell);
    }
    // Compile time: what warm-up took beyond steady steps.
    let (c, w) = (cold.warmup.excess_s.unwrap(), warm.warmup.excess_s.unwrap());
    // SPIR-V and autotune results are kept; the driver's pipelines are not
    // (cubecl 0.10 does not use wgpu's pipeline cache) and are built again:
    // 6.4× to 9.7× shorter on lavapipe (lab notes), 4× at the least.
    assert!(c >= 4.0 * w, "the warm start is not 4× shorter: cold {c:.2} s, warm {w:.2} s");
    eprintln!(
        "cold: compile {c:.2} s, first step {:.0} ms, step p50 {:.1} ms; warm: compile {w:.2} s, first step {:.0} ms, step p50 {:.1} ms",
        cold.warmup.first_step_ms.unwrap_or(f64::NAN),
        cold.step_ms.p50,
        warm.warmup.first_step_ms.unwrap_or(f64::NAN),
        warm.step_ms.p50
    );
    // The steady steps are the engine's, whatever the cache: within the run's noise.
    let (a, b) = (cold.step_ms.p50, warm.step_ms.p50);
    let noise = (3.0 * cold.step_ms.std.max(warm.step_ms.std)).max(0.15 * a.min(b));
    assert!(
        (a - b).abs() <= noise,
        "measured steps: cold p50 {a:.1} ms, warm {b:.1} ms, noise {noise:.1} ms"
    );
    // It trains as flex does: the same recipe's accuracy within the noise of 60 steps.
    let (acc, flex_acc) = (cold.final_test_accuracy, flex.final_test_accuracy);
    eprintln!("test accuracy: wgpu {acc:.3} (warm {:.3}), flex {flex_acc:.3}", warm.final_test_accuracy);
    assert!((acc - flex_acc).abs() < 0.12, "wgpu {acc:.3} against flex {flex_acc:.3}");

    // A damaged cache: a grown chunk, a truncated table of contents and a
    // planted file are discarded with a warning each, and the cell trains.
    let kernels = cache().join("kernels").join(&cj.cache_key);
    let mut damaged = 0;
    for entry in walk(&kernels) {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".cbor") {
            let mut bytes = std::fs::read(&entry).unwrap();
            bytes.extend_from_slice(b"\xff\xff garbage");
            std::fs::write(&entry, bytes).unwrap();
            damaged += 1;
        } else if name == "toc.json.log" {
            let len = std::fs::metadata(&entry).unwrap().len();
            std::fs::OpenOptions::new().write(true).open(&entry).unwrap().set_len(len / 2).unwrap();
            damaged += 1;
        }
    }
    assert!(damaged >= 2, "a chunk and a table of contents in {}", kernels.display());
    std::fs::write(kernels.join("vulkan-planted.cbor"), b"not a kernel").unwrap();
    let again = config(dir.path(), "again", "");
    let out2 = dir.path().join("out2");
    let run = benchkit().arg("run").arg(&again).arg("-o").arg(&out2).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains(&format!("warning: kernel cache {}: ", cj.cache_key)), "{stdout}");
    let records = cells(&out2);
    let jit = first(&records[0]).jit.clone().unwrap();
    assert!(jit.discarded.len() >= 3, "{:?}", jit.discarded);
    assert!(jit.discarded.iter().any(|d| d.contains("not in the manifest")), "{:?}", jit.discarded);
    assert!(
        jit.discarded.iter().any(|d| d.contains("past the") || d.contains("shorter than")),
        "{:?}",
        jit.discarded
    );

    // Data-parallel on wgpu: two processes, each a replica on the machine's
    // adapter (the one software adapter shared), at the shapes kept above.
    let train = "epochs = 1\nbatch_size = 64\nwarmup_steps = 2\nmax_steps_per_epoch = 6";
    let dp = config_with(dir.path(), "dp", train, "[distributed]\nprocesses = 2");
    let out3 = dir.path().join("out3");
    let run = benchkit().arg("run").arg(&dp).arg("-o").arg(&out3).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let records = cells(&out3);
    let r = first(&records[0]);
    assert_eq!((r.parallel.replicas, r.parallel.processes, r.parallel.replicas_agree), (2, 2, Some(true)));
    assert_eq!(r.warmup.ended, Some(WarmupEnd::Fixed), "the ranks keep the fixed count: {:?}", r.warmup);
    assert!(r.jit.as_ref().is_some_and(|j| j.engine == "cubecl-wgpu"), "{:?}", r.jit);

    // `benchkit kernels` lists the folder, and clears it.
    let listed = benchkit().args(["kernels", "list"]).output().unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&cj.cache_key));
    benchkit().args(["kernels", "clear"]).assert().success();
    assert!(!kernels.exists());
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[test]
fn a_machine_without_a_vulkan_driver_is_refused_with_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "nodriver", "");
    // The Vulkan loader pointed at no driver: what a machine without one sees.
    let out = benchkit()
        .arg("validate")
        .arg(&cfg)
        .env("VK_ICD_FILENAMES", dir.path().join("none.json"))
        .env("VK_DRIVER_FILES", dir.path().join("none.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "validate passed without a driver: {stderr}");
    assert!(stderr.contains("backend \"wgpu\" found no"), "{stderr}");
    assert!(stderr.contains("mesa-vulkan-drivers"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
