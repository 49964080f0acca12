//! End-to-end: `[profile] ops = true` times every op of the graph, forward
//! and backward, in every other measured step, and accounts for the step:
//! the rows and what is left unattributed add up to the profiled step, and
//! the headline figures come from the plain steps alone.

use crate::common;

use benchkit_schema::{Event, OpCategory, OpProfile, Stamped};
use common::{benchkit, records, small_config};

/// The checks every backend's op profile must pass: each op of the graph
/// timed forward and backward, the loss, the optimizer and the copy to the
/// device beside them, the step attributed within 5 %, and its cost said.
pub fn check_profile(p: &OpProfile, nodes: &[&str]) {
    let row =
        |name: &str| p.rows.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("no row {name}: {p:?}"));
    for name in nodes {
        let r = row(name);
        assert!(r.forward_ms > 0.0 && r.backward_ms >= 0.0, "{name}: {r:?}");
    }
    let convs: Vec<_> = p.rows.iter().filter(|r| r.category == OpCategory::Convolution).collect();
    assert!(convs.len() >= 17, "ResNet-18 has 17 or more convolutions: {convs:?}");
    for c in &convs {
        assert!(c.backward_ms > 0.0 && c.macs > 0 && c.bytes > 0 && c.gflops().is_finite(), "{c:?}");
    }
    assert!(row("loss").forward_ms > 0.0 && row("optimizer").forward_ms > 0.0, "{p:?}");
    let share = p.unattributed_ms().abs() / p.step_ms;
    assert!(share <= 0.05, "{:.1} % of the step is not attributed: {p:?}", 100.0 * share);
    assert!(p.steps >= 2 && p.plain_step_ms > 0.0 && p.overhead_pct().is_finite(), "{p:?}");
}

/// Config `ops.toml` in `dir`: an eighth-width ResNet-18 on synthetic 28 px
/// images at batch 128 (steps long enough that the machine's other work
/// does not swamp the microseconds between ops), two warm-up steps and six
/// measured, every op timed, and `tail`.
pub fn config(dir: &std::path::Path, tail: &str) -> std::path::PathBuf {
    let data =
        "source = \"synthetic\"\nshape = [1, 28, 28]\nsamples = 1536\ntest_samples = 32\nnum_classes = 10";
    let train = "batch_size = 128\nwarmup_steps = 2\nmax_steps_per_epoch = 8\n";
    small_config(dir, "ops", "", data, train, &format!("[profile]\nops = true\n\n{tail}"))
}

#[test]
fn a_flex_step_is_accounted_for_op_by_op() {
    let dir = tempfile::tempdir().unwrap();
    let cfg =
        config(dir.path(), "[timeline]\nfirst_steps = 10\n\n[[reporters]]\nplugin = \"builtin:timeline\"\n");
    let out = dir.path().join("out");
    let assert = benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert.success();
    let records = records(&out);
    let result = &records[0].repeats[0];
    let ops = result.ops.as_ref().expect("an op profile");
    assert_eq!(ops.backend, "flex");
    check_profile(ops, &["conv1", "layer1.0.conv1", "fc"]);
    // Six measured steps: three profiled, and the headline from the other three.
    assert_eq!(ops.steps, 3, "{ops:?}");
    assert_eq!(result.steps_measured, 3, "{result:?}");
    let phases = result.phases.as_ref().expect("op profiling profiles the phases too");
    assert_eq!(phases.steps, 3);
    assert!(stdout.contains("its slowest ops") && stdout.contains("attributed to ops"), "{stdout}");
    // The three slowest ops taking one input, each timed alone on flex.
    assert_eq!(ops.checks.len(), 3, "{ops:?}");
    for c in &ops.checks {
        assert!(c.runs >= 5 && c.alone_ms > 0.0 && c.profiled_ms > 0.0, "{c:?}");
    }
    // The timeline: each profiled step's ops, consecutive from the batch's
    // arrival, add up to its compute within 5 %, on a track of their own.
    let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    let timeline = events
        .lines()
        .find_map(|l| match Stamped::parse(l).unwrap().event {
            Event::Timeline(t) => Some(*t),
            _ => None,
        })
        .expect("a timeline event");
    let traced: Vec<_> = timeline.ranks[0].steps.iter().filter(|s| !s.ops.is_empty()).collect();
    assert_eq!(traced.len(), 3, "the three profiled steps");
    for s in traced {
        let sum: u64 = s.ops.iter().map(|o| o.us).sum();
        let off = (sum as f64 - s.compute_us as f64).abs() / s.compute_us as f64;
        assert!(off <= 0.05, "step {}: ops {sum} us, compute {} us", s.step, s.compute_us);
        assert!(s.ops.iter().any(|o| o.name == "layer1.0.conv1" && o.backward), "{:?}", s.ops);
    }
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("timeline-ops-r1.json")).unwrap()).unwrap();
    let facts = common::trace_check::check(&trace).unwrap_or_else(|e| panic!("{}", e.join("\n")));
    assert!(facts.threads.values().any(|t| t.contains("ops (forward, backward)")), "{facts:?}");
}
