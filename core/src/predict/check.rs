//! A prediction set against what was measured: every multi-replica cell of
//! the run that differs from the predicted-from cell only in its replicas,
//! batch, collective, buckets and link ([`REPLICA_KEYS`]), over the network
//! the link's figures describe, priced with its own gradient buckets and
//! all-reduce algorithm.
//!
//! - **measured step less data wait**: the median over its repeats of the
//!   cell's compute p50 (each step from its batch's arrival to the end of
//!   its optimizer update, the all-reduce it waited for included): what the
//!   model predicts, which holds no data wait, so both sides are the same
//!   quantity;
//! - **predicted step**: the model's for that many replicas (compute +
//!   exposed communication), weak scaling
//!   when the cell's per-replica batch is the base's, strong when its
//!   global batch is, overlapping the backward pass where the cell did
//!   and could: on GPUs, or with a core its compute left free;
//!   on CPUs, the base's compute times the **core share**: how many more
//!   threads than cores the cell's processes ran on a machine, against the
//!   base's (`max(1, processes a machine × threads a process ÷ cores)`,
//!   each; a process's threads are its devices × `threads_per_device`, or
//!   one a core without it), as ranks of one machine compete for its cores;
//! - **error** = predicted ÷ measured − 1;
//! - **measured efficiency**: base step ÷ cell step (weak), or base step ÷
//!   (replicas × cell step) (strong), each step less its data wait, the
//!   base's measured the same way;
//!   **predicted efficiency** the same with the predicted step.

use super::{Algorithm, Measured, Overlap, Scaling, Schedule, Topology};
use benchkit_schema::scaling::REPLICA_KEYS;
use benchkit_schema::stats::median;
use benchkit_schema::CellRecord;
use benchkit_schema::{CellResult, ParallelReport};
use serde::Serialize;

/// One measured cell and its prediction.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub cell: String,
    /// What a person calls the cell (its summary's label, else its id).
    pub label: String,
    pub replicas: usize,
    pub scaling: &'static str,
    pub algorithm: &'static str,
    pub overlap: &'static str,
    /// What the base's compute was multiplied by for cores shared.
    pub core_share: f64,
    pub link: String,
    /// The measured step less its data wait ([`step_s`]).
    pub measured_step_s: f64,
    pub predicted_step_s: f64,
    /// `predicted ÷ measured − 1`.
    pub error: f64,
    pub measured_efficiency: f64,
    pub predicted_efficiency: f64,
}

/// A cell's measured step less its data wait, the quantity the model
/// predicts: the median over its repeats of their compute p50 (the step from
/// its batch's arrival on, exposed communication included), in seconds.
fn step_s(cell: &CellRecord) -> Option<f64> {
    let p50s: Vec<f64> =
        cell.repeats.iter().map(|r| r.compute_ms.p50 / 1e3).filter(|s| s.is_finite() && *s > 0.0).collect();
    (!p50s.is_empty()).then(|| median(&p50s))
}

/// The swept values of `cell` other than the replica keys, as text.
fn other_axes(cell: &CellRecord) -> Vec<(String, String)> {
    cell.axes
        .iter()
        .filter(|(k, _)| !REPLICA_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect()
}

/// Compute threads the cell's processes want on one machine over its
/// `cores`; `None` where a device is a GPU (NVML saw one), not cores.
fn core_demand(repeat: &CellResult, cores: usize) -> Option<f64> {
    let p: &ParallelReport = &repeat.parallel;
    if repeat.gpu.is_some() || cores == 0 {
        return None;
    }
    let processes = p.processes.div_ceil(p.machines.max(1));
    // Without a count, a process's replicas share one pool of a thread a core.
    let threads = processes * p.threads_per_device.map_or(cores, |t| p.devices * t);
    Some(threads as f64 / cores as f64)
}

/// How much slower a process of `repeat` computes for sharing its machine's
/// `cores` with the cell's other processes: its core demand, at least 1.
fn core_share(repeat: &CellResult, cores: usize) -> f64 {
    core_demand(repeat, cores).map_or(1.0, |d| d.max(1.0))
}

/// Whether the all-reduce can run beside the backward pass: on GPUs, or
/// with a core the compute leaves free. Where every core computes, the
/// all-reduce's own CPU work (copies, sums, the TCP stack) takes turns
/// with the compute, and overlapping it hides nothing.
fn spare_core(repeat: &CellResult, cores: usize) -> bool {
    core_demand(repeat, cores).is_none_or(|d| d < 1.0)
}

/// Every cell of `cells` the prediction from `base` over `topology` can be
/// checked against; `cores`: the logical cores of the machine they ran on.
pub fn checks(
    base: &CellRecord,
    measured: &Measured,
    cells: &[CellRecord],
    topology: &Topology,
    cores: Option<usize>,
) -> Vec<Check> {
    let Some(over) = topology.inter.over.as_deref() else { return Vec::new() };
    let Some(base_step) = step_s(base) else { return Vec::new() };
    let Some(base_repeat) = base.repeats.first() else { return Vec::new() };
    let share = |repeat: &CellResult| cores.map_or(1.0, |c| core_share(repeat, c));
    let key = other_axes(base);
    let mut out = Vec::new();
    for cell in cells {
        let Some(repeat) = cell.repeats.first() else { continue };
        let p = &repeat.parallel;
        let replicas = p.replicas;
        if replicas < 2 || p.link.as_deref() != Some(over) || other_axes(cell) != key {
            continue;
        }
        let scaling = if repeat.batch_size == measured.batch * replicas {
            Scaling::Weak
        } else if repeat.batch_size == measured.batch {
            Scaling::Strong
        } else {
            continue;
        };
        let Some(step) = step_s(cell) else { continue };
        let communication = p.communication.as_ref();
        let algorithm = match communication.map(|c| c.algorithm.as_str()) {
            Some("tree") => Algorithm::Tree,
            _ => Algorithm::Ring,
        };
        let buckets = match communication.map(|c| &c.bucket_bytes) {
            Some(b) if !b.is_empty() => b.iter().map(|&b| b as f64).collect(),
            _ => measured.buckets.clone(),
        };
        let overlapped =
            communication.is_some_and(|c| c.overlapped) && cores.is_none_or(|c| spare_core(repeat, c));
        let overlap = if overlapped { Overlap::Backward } else { Overlap::None };
        let core_share = share(repeat) / share(base_repeat);
        let priced = Measured {
            compute_s: measured.compute_s * core_share,
            backward_s: measured.backward_s * core_share,
            buckets,
            ..measured.clone()
        };
        let point = super::point(&priced, topology, Schedule { algorithm, overlap }, scaling, replicas);
        // Both efficiencies against the base's measured step.
        let efficiency = |step: f64| match scaling {
            Scaling::Weak => base_step / step,
            Scaling::Strong => base_step / (replicas as f64 * step),
        };
        let scaling = if scaling == Scaling::Weak { "weak" } else { "strong" };
        out.push(Check {
            cell: cell.cell.clone(),
            label: cell.summary.as_ref().map_or_else(|| cell.cell.clone(), |s| s.shown().to_string()),
            replicas,
            scaling,
            algorithm: algorithm.name(),
            overlap: overlap.name(),
            core_share,
            link: over.to_string(),
            measured_step_s: step,
            predicted_step_s: point.step_s,
            error: point.step_s / step - 1.0,
            measured_efficiency: efficiency(step),
            predicted_efficiency: efficiency(point.step_s),
        });
    }
    out.sort_by_key(|c| (c.scaling, c.replicas));
    out
}

/// The check table's columns, as the terminal and `predict.html` head them.
pub const COLUMNS: [&str; 10] = [
    "cell",
    "replicas",
    "scaling",
    "overlap",
    "core share",
    "measured step less data wait",
    "predicted step",
    "error",
    "measured eff",
    "predicted eff",
];

impl Check {
    /// This check's values under [`COLUMNS`], as text.
    pub fn values(&self) -> [String; 10] {
        [
            self.label.clone(),
            self.replicas.to_string(),
            self.scaling.to_string(),
            self.overlap.to_string(),
            format!("{:.2}×", self.core_share),
            format!("{:.1} ms", self.measured_step_s * 1e3),
            format!("{:.1} ms", self.predicted_step_s * 1e3),
            format!("{:+.1} %", self.error * 100.0),
            format!("{:.1} %", self.measured_efficiency * 100.0),
            format!("{:.1} %", self.predicted_efficiency * 100.0),
        ]
    }
}

/// The checks as a table, under a line naming the link; nothing without checks.
pub fn table(checks: &[Check]) -> String {
    let Some(first) = checks.first() else { return String::new() };
    let mut out = format!("\nagainst the measured cells over {}\n", first.link);
    let mut line = |cells: &[String]| {
        let rest: Vec<String> = cells[1..]
            .iter()
            .zip(&COLUMNS[1..])
            .map(|(v, h)| format!("{v:>w$}", w = h.len().max(8)))
            .collect();
        out.push_str(&format!("{:<40}  {}\n", cells[0], rest.join("  ")));
    };
    line(&COLUMNS.map(String::from));
    for c in checks {
        line(&c.values());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::Link;

    fn record(cell: &str, repeat: CellResult) -> CellRecord {
        crate::analysis::sample_record(cell, repeat)
    }

    /// Base: 1 replica, batch 32, steps of 110 ms p50 of which 100 ms
    /// compute (10 ms data wait). Cell: 2 replicas, batch 64 (weak), 125 ms
    /// steps of which 102 ms compute (23 ms waiting for data). A ring
    /// all-reduce of one 1 MB bucket over α 10 µs, 1 GB/s, no overlap:
    /// predicted 0.1 + 2·10 µs + 2·(1/2)·1 MB / 1 GB/s = 101.02 ms.
    /// Against the 102 ms the step spent past its data: −0.96 %, measured
    /// efficiency 100/102 = 98.04 %, predicted 100/101.02 = 98.99 %
    /// (against its whole 125 ms step: −19.2 %, and a predicted 108.9 %).
    #[test]
    fn a_check_compares_steps_less_their_data_wait() {
        let mut base = crate::analysis::sample_result("base", 1, 32, 32, 0.1);
        (base.step_ms.p50, base.data_wait_ms.p50) = (110.0, 10.0);
        let mut two = crate::analysis::sample_result("two", 1, 64, 64, 0.102);
        (two.step_ms.p50, two.data_wait_ms.p50) = (125.0, 23.0);
        two.parallel.replicas = 2;
        two.parallel.link = Some("test".into());
        let measured = Measured { compute_s: 0.1, backward_s: 0.06, batch: 32, buckets: vec![1e6] };
        let link = Link {
            name: "test".into(),
            alpha_s: 10e-6,
            bytes_per_s: 1e9,
            source: "by hand".into(),
            over: Some("test".into()),
        };
        let topology = Topology { gpus_per_machine: 1, intra: link.clone(), inter: link };
        let base = record("base", base);
        let checks = checks(&base, &measured, &[record("two", two)], &topology, None);
        let [c] = checks.as_slice() else { panic!("{checks:?}") };
        assert_eq!((c.scaling, c.overlap), ("weak", "none"));
        assert!((c.measured_step_s - 0.102).abs() < 1e-12, "{c:?}");
        assert!((c.predicted_step_s - 0.10102).abs() < 1e-12, "{c:?}");
        assert!((c.error - (0.10102 / 0.102 - 1.0)).abs() < 1e-12, "{c:?}");
        assert!((c.measured_efficiency - 0.1 / 0.102).abs() < 1e-12, "{c:?}");
        assert!((c.predicted_efficiency - 0.1 / 0.10102).abs() < 1e-12, "{c:?}");
    }

    /// A CPU cell of `processes` processes on `machines` machines, each
    /// replica computing with `threads` threads.
    fn repeat(processes: usize, machines: usize, threads: Option<usize>) -> CellResult {
        let mut repeat = crate::analysis::sample_result("c", 1, 32, 32, 0.1);
        repeat.parallel.processes = processes;
        repeat.parallel.machines = machines;
        repeat.parallel.threads_per_device = threads;
        repeat
    }

    #[test]
    fn ranks_sharing_a_machine_compute_slower_by_threads_over_cores() {
        // Two cores: one process of one thread leaves one idle.
        assert_eq!(core_share(&repeat(1, 1, Some(1)), 2), 1.0);
        // Three single-thread processes on two cores: each gets 2/3 of one.
        assert_eq!(core_share(&repeat(3, 1, Some(1)), 2), 1.5);
        // Two processes each wanting every core.
        assert_eq!(core_share(&repeat(2, 1, None), 2), 2.0);
        // Four processes on two machines of four cores, two threads each: none shared.
        assert_eq!(core_share(&repeat(4, 2, Some(2)), 4), 1.0);
        // Two devices of one process share its one pool without a count...
        let mut two = repeat(1, 1, None);
        two.parallel.devices = 2;
        assert_eq!(core_share(&two, 2), 1.0);
        // ...and with one, each has its own.
        two.parallel.threads_per_device = Some(2);
        assert_eq!(core_share(&two, 2), 2.0);
        // Overlap needs a core the compute leaves free.
        assert!(spare_core(&repeat(1, 1, Some(1)), 2));
        assert!(!spare_core(&repeat(2, 1, Some(1)), 2) && !spare_core(&repeat(3, 1, Some(1)), 2));
        // A GPU cell's devices are not cores.
        let mut gpu = repeat(3, 1, Some(1));
        gpu.gpu = Some(benchkit_schema::GpuReport {
            period_ms: 100,
            started_unix_ms: 0,
            devices: Vec::new(),
            unavailable: None,
        });
        assert_eq!(core_share(&gpu, 2), 1.0);
        assert!(spare_core(&gpu, 2));
    }
}
