//! End-to-end: `[profile] ops = true` times every op of the graph, forward
//! and backward, in every other measured step, and accounts for the step:
//! the rows and what is left unattributed add up to the profiled step, and
//! the headline figures come from the plain steps alone.

use crate::common;

use benchkit_schema::{OpCategory, OpProfile};
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

#[test]
fn a_flex_step_is_accounted_for_op_by_op() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_config(
        dir.path(),
        "ops",
        "",
        "source = \"synthetic\"\nshape = [1, 28, 28]\nsamples = 512\ntest_samples = 32\nnum_classes = 10",
        "warmup_steps = 2\nmax_steps_per_epoch = 8\n",
        "[profile]\nops = true\n",
    );
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
}
