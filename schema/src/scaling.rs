//! Scaling efficiency: how close a multi-replica cell came to `replicas`
//! times a 1-replica cell's speed. It compares cells, so it is computed
//! once every cell of a run is in (and again by `benchkit report` from the
//! stored results), never while the run goes on: the figure cannot depend
//! on the order the cells ran in.
//!
//! Both kinds are `images/s ÷ (replicas × baseline images/s)`, the
//! baseline's images/s being the median over its repeats; they differ in
//! the baseline, the 1-replica cell equal to the scaled one on every swept
//! key but the replica counts, the batch, and the collective between
//! processes and its gradient buckets, which one replica does not use
//! ([`REPLICA_KEYS`]):
//! - **weak** scaling (fixed per-replica batch): the baseline trains the
//!   scaled cell's per-replica batch, `global batch ÷ replicas`;
//! - **strong** scaling (fixed global batch): the baseline trains the
//!   scaled cell's global batch.
//!
//! Replicas are counted over all processes; pipeline cells
//! are neither scaled nor baselines, and a baseline must have run on the
//! same kind of machine as the scaled cell ([`crate::Machine::kind`]). Where two 1-replica cells qualify, the
//! first in the matrix is the baseline.

use crate::stats::Spread;
use crate::summary::{CellStatus, CellSummary};
use serde::{Deserialize, Serialize};

/// Swept keys a scaled cell and its baseline may differ in
/// (`train.batch_per_worker`: the key's name in results of schema 1.x).
pub const REPLICA_KEYS: [&str; 9] = [
    "devices",
    "distributed.devices",
    "distributed.processes",
    "distributed.collective",
    "distributed.bucket_mib",
    "distributed.link",
    "train.batch_size",
    "train.batch_per_replica",
    "train.batch_per_worker",
];

/// Swept keys that set a cell's replica count (devices × processes): a
/// chart over one of them is a scaling chart.
pub const REPLICA_COUNT_KEYS: [&str; 3] = ["devices", "distributed.devices", "distributed.processes"];

/// One kind of scaling efficiency of one cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Scaling {
    /// `images/s ÷ (replicas × baseline_images_per_s)` over the cell's
    /// repeats (1.0 is linear scaling).
    pub efficiency: Spread,
    /// The 1-replica cell it is measured against.
    pub baseline_cell: String,
    /// The baseline's median images/s over its repeats.
    pub baseline_images_per_s: f64,
    /// The baseline's (global) batch.
    pub baseline_batch: usize,
    /// The scaled cell's replicas.
    pub replicas: usize,
}

impl Scaling {
    /// What the cell would train if it scaled linearly from its baseline:
    /// the ideal a scaling chart draws beside the measured images/s.
    ///
    /// Formula: ideal images/s = baseline images/s × replicas.
    pub fn ideal_images_per_s(&self) -> f64 {
        self.baseline_images_per_s * self.replicas as f64
    }
}

/// A multi-replica cell's scaling, each kind where its baseline ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct CellScaling {
    pub cell: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weak: Option<Scaling>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strong: Option<Scaling>,
}

/// The cell's swept values other than [`REPLICA_KEYS`], as text.
fn other_axes(s: &CellSummary) -> Vec<(&str, String)> {
    s.axes
        .iter()
        .filter(|(k, _)| !REPLICA_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v.to_string()))
        .collect()
}

/// Whether `a` and `b` ran on the same kind of machine (or neither says
/// where it ran): a baseline measured on another kind of machine (a merged
/// run's cells may come from several) says nothing of how this one scaled.
fn same_machine(a: &CellSummary, b: &CellSummary) -> bool {
    a.machine.as_ref().map(crate::Machine::kind) == b.machine.as_ref().map(crate::Machine::kind)
}

/// Whether `s` finished with a speed and trained data-parallel or alone.
fn measured(s: &CellSummary) -> bool {
    s.status == CellStatus::Ok && s.pipeline.is_none() && s.images_per_s.is_some() && s.batch_size.is_some()
}

/// The scaling of every multi-replica cell of `summaries` that has a baseline.
///
/// Formula (weak): images/s ÷ (replicas × baseline images/s), the baseline the 1-replica cell
/// training the per-replica batch, global batch ÷ replicas.
/// Formula (strong): images/s ÷ (replicas × baseline images/s), the baseline the 1-replica cell
/// training the same global batch.
pub fn scaling(summaries: &[CellSummary]) -> Vec<CellScaling> {
    let mut ordered: Vec<&CellSummary> = summaries.iter().filter(|s| measured(s)).collect();
    ordered.sort_by_key(|s| s.index);
    let singles: Vec<&CellSummary> =
        ordered.iter().copied().filter(|s| s.replicas.unwrap_or(1) == 1).collect();
    let mut out = Vec::new();
    for cell in ordered.iter().filter(|s| s.replicas.unwrap_or(1) > 1) {
        let (Some(replicas), Some(batch), Some(speed)) = (cell.replicas, cell.batch_size, cell.images_per_s)
        else {
            continue;
        };
        let key = other_axes(cell);
        let against = |wanted: usize| -> Option<Scaling> {
            let base = singles
                .iter()
                .find(|b| b.batch_size == Some(wanted) && other_axes(b) == key && same_machine(b, cell))?;
            let base_speed = base.images_per_s?.median;
            if !(base_speed.is_finite() && base_speed > 0.0) {
                return None;
            }
            Some(Scaling {
                efficiency: speed.scaled(1.0 / (replicas as f64 * base_speed)),
                baseline_cell: base.cell.clone(),
                baseline_images_per_s: base_speed,
                baseline_batch: wanted,
                replicas,
            })
        };
        let weak = batch.is_multiple_of(replicas).then(|| against(batch / replicas)).flatten();
        let strong = against(batch);
        if weak.is_some() || strong.is_some() {
            out.push(CellScaling { cell: cell.cell.clone(), weak, strong });
        }
    }
    out
}

/// Set each summary's scaling from `scaling`, clearing any it had.
pub fn apply(summaries: &mut [CellSummary], scaling: &[CellScaling]) {
    for s in summaries {
        let found = scaling.iter().find(|c| c.cell == s.cell);
        s.weak_scaling = found.and_then(|c| c.weak.clone());
        s.strong_scaling = found.and_then(|c| c.strong.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::Mode;

    /// A finished cell: `replicas` replicas, global batch `batch`, one
    /// repeat per speed in `speeds`.
    fn cell(index: usize, replicas: usize, batch: usize, model: &str, speeds: &[f64]) -> CellSummary {
        let mut axes = serde_json::Map::new();
        axes.insert("devices".into(), replicas.into());
        axes.insert("train.batch_size".into(), batch.into());
        axes.insert("model.config.depth".into(), model.into());
        let id = format!("devices={replicas},batch_size={batch},depth={model}");
        let mut s = CellSummary::of(index, &id, &axes, &[], None);
        s.status = CellStatus::Ok;
        s.replicas = (replicas > 1).then_some(replicas);
        s.batch_size = Some(batch);
        s.mode = Some(Mode::Train);
        s.images_per_s = Spread::of(speeds);
        s
    }

    fn find<'a>(all: &'a [CellScaling], id: &str) -> &'a CellScaling {
        all.iter().find(|c| c.cell == id).unwrap_or_else(|| panic!("no scaling for {id}: {all:?}"))
    }

    /// Two batch sizes × two replica counts, worked out by hand:
    /// 1 replica: batch 32 at 100 img/s, batch 64 at 120 img/s;
    /// 2 replicas: batch 64 at 180 img/s, batch 128 at 220 img/s.
    fn grid() -> Vec<CellSummary> {
        vec![
            cell(0, 1, 32, "50", &[100.0]),
            cell(1, 1, 64, "50", &[110.0, 120.0, 130.0]),
            cell(2, 2, 64, "50", &[180.0]),
            cell(3, 2, 128, "50", &[210.0, 220.0, 230.0]),
        ]
    }

    #[test]
    fn the_ideal_is_the_baseline_times_the_replicas() {
        // 4 replicas of a 250 img/s baseline: 1,000 img/s ideal; a cell at 750
        // img/s is at the 75 % its efficiency says.
        let x = Scaling {
            efficiency: Spread::of(&[0.75]).unwrap(),
            baseline_cell: "one".into(),
            baseline_images_per_s: 250.0,
            baseline_batch: 32,
            replicas: 4,
        };
        assert_eq!(x.ideal_images_per_s(), 1000.0);
        assert_eq!(750.0 / x.ideal_images_per_s(), x.efficiency.median);
    }

    #[test]
    fn weak_and_strong_scaling_against_their_own_baselines() {
        let all = scaling(&grid());
        assert_eq!(all.len(), 2);
        // Batch 64 on 2 replicas: weak against batch 32 (180 / (2 × 100) = 0.9),
        // strong against batch 64 (180 / (2 × 120) = 0.75).
        let c = find(&all, "devices=2,batch_size=64,depth=50");
        let weak = c.weak.as_ref().unwrap();
        assert_eq!(weak.baseline_cell, "devices=1,batch_size=32,depth=50");
        assert!((weak.efficiency.median - 0.9).abs() < 1e-12, "{weak:?}");
        assert_eq!((weak.baseline_batch, weak.replicas), (32, 2));
        let strong = c.strong.as_ref().unwrap();
        assert_eq!(strong.baseline_cell, "devices=1,batch_size=64,depth=50");
        assert!((strong.efficiency.median - 0.75).abs() < 1e-12, "{strong:?}");
        // Batch 128 on 2 replicas: weak against batch 64 (median 120):
        // 220 / 240, its repeats 210 / 240 to 230 / 240; no 1-replica batch 128.
        let c = find(&all, "devices=2,batch_size=128,depth=50");
        let weak = c.weak.as_ref().unwrap();
        assert!((weak.efficiency.median - 220.0 / 240.0).abs() < 1e-12);
        assert!((weak.efficiency.min - 210.0 / 240.0).abs() < 1e-12);
        assert!((weak.efficiency.max - 230.0 / 240.0).abs() < 1e-12);
        assert_eq!(weak.baseline_images_per_s, 120.0);
        assert!(c.strong.is_none(), "no 1-replica cell trained batch 128");
    }

    /// A 2-process cell over Gloo on an emulated link is scaled against
    /// the 1-process cell, which names no collective and no link.
    #[test]
    fn the_collective_between_processes_is_no_baseline_key() {
        let mut cells = grid();
        cells[2].axes.insert("distributed.collective".into(), "gloo".into());
        cells[2].axes.insert("distributed.link".into(), "1gbit".into());
        let all = scaling(&cells);
        let weak = find(&all, "devices=2,batch_size=64,depth=50").weak.as_ref().unwrap();
        assert_eq!(weak.baseline_cell, "devices=1,batch_size=32,depth=50");
    }

    #[test]
    fn the_order_cells_arrive_in_changes_nothing() {
        let forward = scaling(&grid());
        let mut reversed = grid();
        reversed.reverse();
        let mut backward = scaling(&reversed);
        backward.sort_by(|a, b| a.cell.cmp(&b.cell));
        let mut forward_sorted = forward.clone();
        forward_sorted.sort_by(|a, b| a.cell.cmp(&b.cell));
        assert_eq!(forward_sorted, backward);
    }

    #[test]
    fn a_baseline_differs_only_in_replicas_and_batch() {
        let mut cells = grid();
        // Another model's 1-replica cell at batch 32 is no baseline for depth 50.
        cells[0] = cell(0, 1, 32, "18", &[1000.0]);
        let all = scaling(&cells);
        let c = find(&all, "devices=2,batch_size=64,depth=50");
        assert!(c.weak.is_none(), "{c:?}");
        assert!(c.strong.is_some());
        // A failed baseline is no baseline either.
        let mut cells = grid();
        cells[1].status = CellStatus::Failed;
        let all = scaling(&cells);
        assert!(find(&all, "devices=2,batch_size=64,depth=50").strong.is_none());
        assert!(all.iter().all(|c| c.cell != "devices=2,batch_size=128,depth=50"));
    }

    /// In a merged run, a 1-replica cell measured on another kind of
    /// machine is no baseline; one on another machine of the same kind is.
    #[test]
    fn a_baseline_ran_on_the_same_kind_of_machine() {
        let machine = |host: &str, gpu: &str| crate::Machine {
            cpu_model: "Xeon".into(),
            logical_cores: 32,
            memory_gib: 250.0,
            gpus: vec![gpu.into(); 2],
            gpu_driver: Some("550".into()),
            hostname: host.into(),
        };
        let mut cells = grid();
        for c in &mut cells {
            c.machine = Some(machine("a1", "H100"));
        }
        cells[0].machine = Some(machine("b7", "A100"));
        cells[1].machine = Some(machine("a2", "H100"));
        let all = scaling(&cells);
        let c = find(&all, "devices=2,batch_size=64,depth=50");
        assert!(c.weak.is_none(), "batch 32 ran on the A100 machine: {c:?}");
        assert_eq!(c.strong.as_ref().unwrap().baseline_cell, "devices=1,batch_size=64,depth=50");
    }

    #[test]
    fn applied_scaling_replaces_what_a_summary_held() {
        let mut cells = grid();
        let all = scaling(&cells);
        apply(&mut cells, &all);
        assert!(cells[2].weak_scaling.is_some() && cells[2].strong_scaling.is_some());
        assert!(cells[0].weak_scaling.is_none());
        apply(&mut cells, &[]);
        assert!(cells[2].weak_scaling.is_none());
    }
}
