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
//! - **noise**: the measured side's own noise: half the range of the
//!   cell's repeats' compute p50 over their median, plus the base's the
//!   same way (both enter the error); a check whose noise exceeds
//!   [`TOLERANCE`] is not scored, nor one without two repeats of each;
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
    /// The measured side's own noise ([`noise`]), a fraction; NaN with
    /// fewer than two repeats of the cell or the base.
    pub noise: f64,
    /// Whether the error is scored against [`TOLERANCE`]: its noise known and within it.
    pub scored: bool,
}

/// A prediction is right within this fraction of the measured step.
pub const TOLERANCE: f64 = 0.15;

/// Half the range of `cell`'s repeats' compute p50 over their median, a
/// fraction; NaN with fewer than two repeats.
///
/// Formula: (max − min) / (2 × median) of the repeats' compute p50.
fn spread(cell: &CellRecord) -> f64 {
    let p50s: Vec<f64> = cell.repeats.iter().map(|r| r.compute_ms.p50).filter(|s| *s > 0.0).collect();
    benchkit_schema::Spread::of(&p50s).map_or(f64::NAN, |s| s.half_range())
}

/// The noise of a check of `cell` predicted from `base`: each one's spread, added.
///
/// Formula: noise = spread(cell) + spread(base).
pub fn noise(cell: &CellRecord, base: &CellRecord) -> f64 {
    spread(cell) + spread(base)
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
        let noise = noise(cell, base);
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
            noise,
            scored: noise <= TOLERANCE,
        });
    }
    out.sort_by_key(|c| (c.scaling, c.replicas));
    out
}

/// The check table's columns, as the terminal and `predict.html` head them.
pub const COLUMNS: [&str; 12] = [
    "cell",
    "replicas",
    "scaling",
    "overlap",
    "core share",
    "measured step less data wait",
    "predicted step",
    "error",
    "noise",
    "scored",
    "measured eff",
    "predicted eff",
];

impl Check {
    /// This check's values under [`COLUMNS`], as text.
    pub fn values(&self) -> [String; 12] {
        [
            self.label.clone(),
            self.replicas.to_string(),
            self.scaling.to_string(),
            self.overlap.to_string(),
            format!("{:.2}×", self.core_share),
            format!("{:.1} ms", self.measured_step_s * 1e3),
            format!("{:.1} ms", self.predicted_step_s * 1e3),
            format!("{:+.1} %", self.error * 100.0),
            if self.noise.is_finite() {
                format!("±{:.1} %", self.noise * 100.0)
            } else {
                "one repeat".into()
            },
            match (self.scored, self.error.abs() <= TOLERANCE) {
                (false, _) => "no".into(),
                (true, true) => "right".into(),
                (true, false) => "MISSED".into(),
            },
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
    out.push_str(&score_line(checks));
    out
}

/// How many scored checks are within [`TOLERANCE`], and how many were not
/// scored for their own noise.
pub fn score_line(checks: &[Check]) -> String {
    let scored: Vec<&Check> = checks.iter().filter(|c| c.scored).collect();
    let right = scored.iter().filter(|c| c.error.abs() <= TOLERANCE).count();
    format!(
        "{right} of {} scored prediction(s) within {:.0} %; {} not scored (their own noise over {:.0} %, or one repeat)\n",
        scored.len(),
        TOLERANCE * 100.0,
        checks.len() - scored.len(),
        TOLERANCE * 100.0
    )
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
        // One repeat each: no noise to tell, not scored.
        assert!(c.noise.is_nan() && !c.scored, "{c:?}");
    }

    #[test]
    fn a_check_is_scored_only_when_its_own_noise_is_within_the_tolerance() {
        let at = |p50s: &[f64]| {
            let mut r = record("c", crate::analysis::sample_result("c", 1, 32, 32, 0.1));
            r.repeats = p50s
                .iter()
                .map(|&p| {
                    let mut x = crate::analysis::sample_result("c", 1, 32, 32, 0.1);
                    x.compute_ms.p50 = p;
                    x
                })
                .collect();
            r
        };
        // Cell 95, 100, 110 ms: (110 − 95) / 200 = 7.5 %; base 98, 100, 102: 2 %.
        let n = noise(&at(&[95.0, 100.0, 110.0]), &at(&[98.0, 100.0, 102.0]));
        assert!((n - 0.095).abs() < 1e-12, "{n}");
        // Cell 80, 100, 120: 20 %, over the 15 % tolerance alone.
        assert!(noise(&at(&[80.0, 100.0, 120.0]), &at(&[100.0, 100.0])) > TOLERANCE);
        assert!(noise(&at(&[100.0]), &at(&[100.0, 101.0])).is_nan());
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
