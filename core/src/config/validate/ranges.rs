//! The upper bounds a config's values are held to where they size memory
//! or threads, in one place: the validator checks a config against them,
//! and [`within_ranges`] checks a plan read back from a results directory
//! (`run.json`, which may have been edited) against the same ones.

use crate::config::plan::Plan;
use crate::data::Shuffle;
use std::ops::RangeInclusive;

/// Loader workers.
pub const WORKERS: RangeInclusive<usize> = 1..=256;
/// `data.prefetch`, in batches: each one ready is a decoded batch in memory.
pub const PREFETCH: RangeInclusive<usize> = 1..=1024;
/// A side of `data.shape` or `data.resize`, in pixels.
pub const SIDE: RangeInclusive<u32> = 1..=16384;
/// `plugins.memory_mib`.
pub const PLUGIN_MEMORY_MIB: RangeInclusive<u64> = 16..=65536;
/// `plugins.artifacts_mib`.
pub const ARTIFACTS_MIB: RangeInclusive<u64> = 1..=16384;
/// `profile.check`: ops timed alone after training, each its own graph.
pub const OP_CHECKS: RangeInclusive<usize> = 0..=20;

/// Whether `plan`'s values that size memory or threads are within the
/// ranges a config is held to; the first that is not, named, if any.
pub fn within_ranges(plan: &Plan) -> Result<(), String> {
    let d = &plan.data;
    let l = &plan.plugin_limits;
    let out = |key: &str, value: String, range: String| Err(format!("{key} = {value}, outside {range}"));
    if !WORKERS.contains(&d.workers) {
        return out("data.workers", d.workers.to_string(), format!("{WORKERS:?}"));
    }
    if !PREFETCH.contains(&d.prefetch) {
        return out("data.prefetch", d.prefetch.to_string(), format!("{PREFETCH:?}"));
    }
    if let Shuffle::Buffer(n) = d.shuffle {
        if !(1..=crate::data::order::MAX_BUFFER).contains(&n) {
            return out("data.shuffle", n.to_string(), format!("1..={}", crate::data::order::MAX_BUFFER));
        }
    }
    let sides = d.shape[1..].iter().chain(d.resize.iter().flatten());
    if let Some(side) = sides.copied().find(|s| !SIDE.contains(s)) {
        return out("data.shape or data.resize", side.to_string(), format!("{SIDE:?} pixels"));
    }
    if !PLUGIN_MEMORY_MIB.contains(&l.memory_mib) {
        return out("plugins.memory_mib", l.memory_mib.to_string(), format!("{PLUGIN_MEMORY_MIB:?}"));
    }
    if !ARTIFACTS_MIB.contains(&l.artifacts_mib) {
        return out("plugins.artifacts_mib", l.artifacts_mib.to_string(), format!("{ARTIFACTS_MIB:?}"));
    }
    if !OP_CHECKS.contains(&plan.train.op_checks) {
        return out("profile.check", plan.train.op_checks.to_string(), format!("{OP_CHECKS:?}"));
    }
    faults_within(&plan.train.faults, plan.train.parallel.processes)
}

/// Whether each fault's strength is within the range a config is held to,
/// and its ranks within the cell's processes.
fn faults_within(f: &crate::config::Faults, processes: usize) -> Result<(), String> {
    use crate::config::plan::faults::{CPU_SHARE, INPUT_DELAY_MS, STALL_S};
    let out = |key: &str, value: f64, range: &RangeInclusive<f64>| {
        Err(format!("faults.{key} = {value}, outside {range:?}"))
    };
    for (key, value, range) in [
        ("cpu_share", f.cpu_share, &CPU_SHARE),
        ("input_delay_ms", f.input_delay_ms, &INPUT_DELAY_MS),
        ("stall_s", f.stall_s, &STALL_S),
    ] {
        if let Some(v) = value.filter(|v| !range.contains(v)) {
            return out(key, v, range);
        }
    }
    match f.ranks.iter().find(|&&r| r >= processes) {
        Some(r) => Err(format!("faults.ranks names rank {r}, outside the cell's {processes} process(es)")),
        None => Ok(()),
    }
}
