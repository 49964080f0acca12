//! `seeds = N`: how a cell's accuracy and time to target vary with the
//! training seed (MLPerf's convergence variance), kept apart from how they
//! vary between repeats of one seed (the machine's noise).

use crate::result::CellResult;
use crate::stats::Spread;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A cell's figures across its seeds, each seed's the median over its repeats.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct SeedSpread {
    pub seeds: usize,
    /// Final test accuracy across seeds.
    pub final_test_accuracy: Spread,
    /// Time to the target accuracy across the seeds whose repeats reached it.
    pub time_to_target_s: Option<Spread>,
    /// Seeds whose median repeat reached the target.
    pub target_reached_seeds: usize,
    /// The machine's share: the median over seeds of the MAD of final test
    /// accuracy across one seed's repeats (0 with one repeat a seed).
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub accuracy_repeat_mad: f64,
    /// The same for the time to target, where repeats reached it.
    pub time_to_target_repeat_mad: Option<f64>,
}

impl SeedSpread {
    /// The spread over `repeats`; `None` unless they trained with two seeds or more.
    ///
    /// Formula: across seeds, the spread of each seed's median over its repeats; repeat MAD = the
    /// median over seeds of each seed's MAD.
    pub fn of(repeats: &[CellResult]) -> Option<Self> {
        let mut by_seed: BTreeMap<u64, Vec<&CellResult>> = BTreeMap::new();
        for r in repeats {
            by_seed.entry(r.seed).or_default().push(r);
        }
        if by_seed.len() < 2 {
            return None;
        }
        let per_seed = |f: &dyn Fn(&CellResult) -> Option<f64>| -> Vec<Spread> {
            by_seed
                .values()
                .filter_map(|repeats| Spread::of(&repeats.iter().filter_map(|r| f(r)).collect::<Vec<_>>()))
                .collect()
        };
        let accuracy = per_seed(&|r| Some(r.final_test_accuracy));
        // A seed reaches the target when most of its repeats do.
        let reached: Vec<Spread> = by_seed
            .values()
            .filter(|repeats| {
                2 * repeats.iter().filter(|r| r.time_to_target_s.is_some()).count() > repeats.len()
            })
            .filter_map(|repeats| {
                Spread::of(&repeats.iter().filter_map(|r| r.time_to_target_s).collect::<Vec<_>>())
            })
            .collect();
        let medians = |s: &[Spread]| s.iter().map(|s| s.median).collect::<Vec<_>>();
        let mads = |s: &[Spread]| Spread::of(&s.iter().map(|s| s.mad).collect::<Vec<_>>()).map(|m| m.median);
        Some(Self {
            seeds: by_seed.len(),
            final_test_accuracy: Spread::of(&medians(&accuracy))?,
            time_to_target_s: Spread::of(&medians(&reached)),
            target_reached_seeds: reached.len(),
            accuracy_repeat_mad: mads(&accuracy).unwrap_or(f64::NAN),
            time_to_target_repeat_mad: mads(&reached),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;

    /// A finished repeat of `seed` with this accuracy and time to target.
    fn repeat(seed: u64, accuracy: f64, to_target: Option<f64>) -> CellResult {
        let none = serde_json::to_value(Summary::of(&[])).unwrap();
        serde_json::from_value(serde_json::json!({
            "cell": "c", "repeat": 1, "seed": seed, "axes": {}, "model": "m", "backend": "flex",
            "params": 1, "forward_macs_per_image": 1, "batch_size": 8, "steps_measured": 1,
            "images_per_s": 100.0, "step_ms": none, "data_wait_ms": none, "compute_ms": none,
            "data_wait_pct": 0.0, "warmup": { "steps": 0, "mean_step_ms": null, "slowdown": null },
            "final_test_accuracy": accuracy, "best_test_accuracy": accuracy, "epochs": [],
            "wall_s": 1.0, "train_s": 1.0, "eval_s": 0.0, "time_to_target_s": to_target,
            "started_unix_ms": 0, "finished_unix_ms": 1
        }))
        .unwrap()
    }

    #[test]
    fn seeds_spread_apart_from_their_repeats() {
        // Three seeds, three repeats each: seeds differ by whole points,
        // repeats of a seed by a hundredth of one.
        let mut repeats = Vec::new();
        for (seed, acc) in [(1, 0.80), (2, 0.83), (3, 0.86)] {
            for noise in [-0.0001, 0.0, 0.0001] {
                repeats.push(repeat(
                    seed,
                    acc + noise,
                    (seed != 3).then_some(100.0 * seed as f64 + noise * 1e4),
                ));
            }
        }
        let s = SeedSpread::of(&repeats).unwrap();
        assert_eq!(s.seeds, 3);
        assert!((s.final_test_accuracy.median - 0.83).abs() < 1e-9);
        assert!((s.final_test_accuracy.max - s.final_test_accuracy.min - 0.06).abs() < 1e-9);
        assert!((s.accuracy_repeat_mad - 0.0001).abs() < 1e-9, "{}", s.accuracy_repeat_mad);
        assert_eq!(s.target_reached_seeds, 2, "seed 3 never reached the target");
        let t = s.time_to_target_s.unwrap();
        assert_eq!((t.min, t.max), (100.0, 200.0));
        assert!((s.time_to_target_repeat_mad.unwrap() - 1.0).abs() < 1e-9);
        assert!(SeedSpread::of(&repeats[..3]).is_none(), "one seed: no spread across seeds");
    }
}
