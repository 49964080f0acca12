//! benchkit's diagnoses scored against faults injected on purpose: for
//! each cell, what it should have named (the injected straggler, its rank
//! and cause, or none) against what it named, and what the fault cost a
//! step against the same cell without faults. A study's checks read the
//! rates (`diagnoses.*` metrics); `report::study` draws the table.

use benchkit_schema::advice::TOLERANCE_PCT;
use benchkit_schema::{same_but_faults, CellStatus, CellSummary, Expected, InjectedFaults, StragglerCause};
use serde::{Deserialize, Serialize};

/// Injected stragglers count toward the named rate when they cost a step
/// at least this much, in percent: a smaller one is within what noise hides.
pub const MIN_COST_PCT: f64 = 20.0;

/// One finished cell's diagnosis set against its answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    pub cell: String,
    /// What was injected, in words (empty for an even cell).
    pub injected: String,
    /// `compute`, `data`, `communication` or `none`, and the rank where one is expected.
    pub expected: String,
    pub expected_rank: Option<usize>,
    /// What benchkit named: a straggler's cause (`unknown` included) or `none`.
    pub named: String,
    pub named_rank: Option<usize>,
    /// The step p50's growth over the same cell without faults, in percent.
    pub cost_pct: Option<f64>,
    /// The right rank with the right cause, or none where none was expected.
    pub right: bool,
    /// The bottleneck column's answer where a fault sets one: `straggler`
    /// for one slowed rank's compute or input, `communication` for its
    /// link; and what the column named.
    pub bottleneck_expected: Option<String>,
    pub bottleneck_named: Option<String>,
    /// The advice to free the named straggler's machine, its predicted
    /// step against the same cell without faults, as a speed, in percent
    /// ([`advice_error_pct`]); none where no straggler was named.
    #[serde(default)]
    pub advice_error_pct: Option<f64>,
}

/// Every scored cell of a run with the rates a study checks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    pub cells: Vec<Scored>,
}

impl Scores {
    /// The finished cells of `summaries` that inject faults, and their
    /// even counterparts (the same axes but `faults.*`, no faults); none
    /// when no cell injects any.
    pub fn of(summaries: &[CellSummary]) -> Option<Self> {
        if !summaries.iter().any(|s| s.faults.is_some()) {
            return None;
        }
        Some(Self::among(summaries.iter(), summaries))
    }

    /// The finished cells of `selected`, each set against its even
    /// counterpart in `all`.
    pub fn among<'a>(selected: impl Iterator<Item = &'a CellSummary>, all: &[CellSummary]) -> Self {
        let done = selected.filter(|s| s.status == CellStatus::Ok);
        Self { cells: done.map(|s| score(s, all)).collect() }
    }

    /// The injected stragglers costing at least [`MIN_COST_PCT`] that were
    /// named with the right rank and cause, in percent (NaN with none).
    ///
    /// Formula: 100 × right / n over cells expecting a straggler whose cost ≥ 20 %.
    pub fn stragglers_right_pct(&self) -> f64 {
        self.costly_rate(|c| c.expected_rank.is_some(), |c| c.right)
    }

    /// The cells whose fault sets the bottleneck and costs at least
    /// [`MIN_COST_PCT`] whose bottleneck column named it, in percent.
    ///
    /// Formula: 100 × (named = expected) / n over cells with an expected bottleneck and cost ≥ 20 %.
    pub fn bottlenecks_right_pct(&self) -> f64 {
        self.costly_rate(|c| c.bottleneck_expected.is_some(), |c| c.bottleneck_named == c.bottleneck_expected)
    }

    /// The injected compute and data stragglers costing at least
    /// [`MIN_COST_PCT`] whose advice (free the named rank's machine) was
    /// right: it named the injected rank, and its predicted step is within
    /// [`TOLERANCE_PCT`] of the same cell without faults ([`advice_error_pct`]). A link's
    /// fix is its link, which no advised change predicts: those cells are
    /// not counted.
    ///
    /// Formula: 100 × (rank right and |advice error| ≤ 20 %) / n over cells expecting a compute or
    /// data straggler whose cost ≥ 20 %.
    pub fn advice_within_pct(&self) -> f64 {
        let due = |c: &Scored| c.expected_rank.is_some() && (c.expected == "compute" || c.expected == "data");
        let ok = |c: &Scored| {
            c.named_rank == c.expected_rank && c.advice_error_pct.is_some_and(|e| e.abs() <= TOLERANCE_PCT)
        };
        self.costly_rate(due, ok)
    }

    /// Of the cells `due` selects whose fault cost at least [`MIN_COST_PCT`],
    /// the share `ok` holds for, in percent (NaN with none).
    fn costly_rate(&self, due: impl Fn(&Scored) -> bool, ok: impl Fn(&Scored) -> bool) -> f64 {
        let due: Vec<&Scored> =
            self.cells.iter().filter(|c| due(c) && c.cost_pct.is_some_and(|p| p >= MIN_COST_PCT)).collect();
        match due.len() {
            0 => f64::NAN,
            n => 100.0 * due.iter().filter(|c| ok(c)).count() as f64 / n as f64,
        }
    }

    /// Cells expecting no straggler that named one.
    ///
    /// Formula: count of cells with expected = none and named ≠ none.
    pub fn false_stragglers(&self) -> usize {
        self.cells.iter().filter(|c| c.expected_rank.is_none() && c.named_rank.is_some()).count()
    }

    /// Injected class × named class, counted, rows and columns in
    /// [`CLASSES`] order (named adds `unknown`).
    pub fn confusion(&self) -> Vec<(String, Vec<usize>)> {
        let rows = ["compute", "data", "communication", "none"];
        rows.iter()
            .map(|row| {
                let counts = CLASSES
                    .iter()
                    .map(|col| self.cells.iter().filter(|c| c.expected == *row && c.named == *col).count())
                    .collect();
                (row.to_string(), counts)
            })
            .collect()
    }

    /// A run-level figure a study check names (`diagnoses.…`).
    pub fn metric(&self, name: &str) -> Option<f64> {
        match name {
            "diagnoses.stragglers_right_pct" => Some(self.stragglers_right_pct()).filter(|v| v.is_finite()),
            "diagnoses.false_stragglers" => Some(self.false_stragglers() as f64),
            "diagnoses.bottlenecks_right_pct" => Some(self.bottlenecks_right_pct()).filter(|v| v.is_finite()),
            "diagnoses.advice_within_pct" => Some(self.advice_within_pct()).filter(|v| v.is_finite()),
            _ => None,
        }
    }
}

/// The columns of the confusion table: what benchkit may name.
pub const CLASSES: [&str; 5] = ["compute", "data", "communication", "unknown", "none"];

fn score(s: &CellSummary, all: &[CellSummary]) -> Scored {
    let even = s.faults.as_ref().and_then(|_| {
        all.iter()
            .find(|c| c.status == CellStatus::Ok && c.faults.is_none() && same_but_faults(&c.axes, &s.axes))
    });
    let expected = InjectedFaults::expected(s.faults.as_ref());
    let named = s.straggler.as_ref();
    let (expected_class, expected_rank) = match expected {
        Expected::NoStraggler => ("none", None),
        Expected::Straggler { rank, cause } => (cause.name(), Some(rank)),
    };
    let named_class = named.map_or("none", |n| n.cause.name());
    let right = match expected {
        Expected::NoStraggler => named.is_none(),
        Expected::Straggler { rank, cause } => named.is_some_and(|n| n.rank == rank && n.cause == cause),
    };
    let bottleneck_expected = match expected {
        Expected::Straggler { cause: StragglerCause::Communication, .. } => Some("communication"),
        Expected::Straggler { .. } => Some("straggler"),
        Expected::NoStraggler => None,
    };
    Scored {
        bottleneck_expected: bottleneck_expected.map(str::to_string),
        bottleneck_named: s.verdict.as_ref().map(|v| v.bottleneck.label().to_string()),
        cell: s.shown().to_string(),
        injected: s.faults.as_ref().map_or(String::new(), |f| f.described.clone()),
        expected: expected_class.into(),
        expected_rank,
        named: named_class.into(),
        named_rank: named.map(|n| n.rank),
        cost_pct: even.and_then(|e| cost_pct(s, e)),
        advice_error_pct: even.and_then(|e| advice_error_pct(s, e)),
        right,
    }
}

/// The step p50's growth over `even`, `s`'s even counterpart (the same
/// axes but `faults.*`, and no faults), in percent.
///
/// Formula: 100 × (step_p50 − even step_p50) / even step_p50.
fn cost_pct(s: &CellSummary, even: &CellSummary) -> Option<f64> {
    let (own, base) = (step_ms(s)?, step_ms(even)?);
    Some(100.0 * (own - base) / base)
}

/// The advice to free `s`'s named straggler against `even`, the same
/// cell without its faults: what that advice predicts is what `even`
/// measures. Of the step p50s: the predicted step is
/// [`benchkit_schema::Straggler::freed_step_ms`] of `s`'s, set against
/// `even`'s as a speed (the error of the speed it predicts, positive when
/// it predicts faster than measured). The steady step, not the images/s:
/// those of a single repeat carry the machine's stalls (an even cell's p90
/// at 1.6 × its p50 on the 2-core VM), which no model of the fault predicts.
///
/// Formula: 100 × (even step_p50 / freed step − 1).
fn advice_error_pct(s: &CellSummary, even: &CellSummary) -> Option<f64> {
    let straggler = s.straggler.as_ref()?;
    let (step, base) = (step_ms(s)?, step_ms(even)?);
    Some(100.0 * (base / straggler.freed_step_ms(step) - 1.0))
}

fn step_ms(c: &CellSummary) -> Option<f64> {
    c.step_p50_ms.as_ref().map(|x| x.median).filter(|m| m.is_finite() && *m > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchkit_schema::{Spread, Straggler};

    fn cell(id: &str, axes: serde_json::Value, step_ms: f64, faults: Option<InjectedFaults>) -> CellSummary {
        let bare: CellSummary = serde_json::from_value(serde_json::json!({"index": 0, "cell": id,
            "axes": axes, "status": "ok", "reason": null, "model": "m", "backend": "flex",
            "batch_size": 48, "params": 10, "repeats": 1, "images_per_s": null, "step_p50_ms": null,
            "step_p90_ms": null, "step_p99_ms": null, "data_wait_pct": null, "compute_p50_ms": null,
            "final_test_accuracy": null, "target_accuracy": null, "target_reached": 0,
            "time_to_target_s": null, "usd_per_epoch": null, "usd_to_target": null,
            "outliers": [], "warnings": []}))
        .unwrap();
        CellSummary { step_p50_ms: Spread::of(&[step_ms]), faults, ..bare }
    }

    fn named(rank: usize, cause: StragglerCause, wait_ms: f64) -> Option<Straggler> {
        Some(Straggler {
            rank,
            host: String::new(),
            work_p50_ms: 0.0,
            others_work_p50_ms: 0.0,
            noise_ms: 0.0,
            wait_ms,
            arrival_p50_ms: 0.0,
            others_arrival_p50_ms: 0.0,
            data_wait_p50_ms: 0.0,
            others_data_wait_p50_ms: 0.0,
            communication_p50_ms: 0.0,
            others_communication_p50_ms: 0.0,
            cause,
            machine_processes: 0,
            machine_cores: 0,
        })
    }

    #[test]
    fn each_cell_is_set_against_its_answer_and_its_even_counterpart() {
        let fault = |rank: usize, cpu: Option<f64>, delay: Option<f64>| InjectedFaults {
            ranks: vec![rank],
            processes: 2,
            cpu_share: cpu,
            input_delay_ms: delay,
            described: format!("rank {rank}"),
            ..Default::default()
        };
        let even = cell("even", serde_json::json!({}), 40.0, None);
        // Compute on rank 1, named right, costing 50 %; data on rank 0,
        // named as compute, costing 37.5 %; compute on rank 0 costing 10 %
        // and missed (below the floor: not counted in the rate); an even
        // cell with a straggler named (false).
        let mut a =
            cell("a", serde_json::json!({"faults.cpu_share": 0.5}), 60.0, Some(fault(1, Some(0.5), None)));
        a.straggler = named(1, StragglerCause::Compute, 18.0);
        let mut b =
            cell("b", serde_json::json!({"faults.input_delay_ms": 9}), 55.0, Some(fault(0, None, Some(9.0))));
        b.straggler = named(0, StragglerCause::Compute, 0.0);
        let c =
            cell("c", serde_json::json!({"faults.cpu_share": 0.9}), 44.0, Some(fault(0, Some(0.9), None)));
        let mut scores = Scores::of(&[even.clone(), a, b, c]).unwrap();
        let costs: Vec<Option<f64>> = scores.cells.iter().map(|c| c.cost_pct).collect();
        assert_eq!(costs, [None, Some(50.0), Some(37.5), Some(10.0)]);
        let right: Vec<bool> = scores.cells.iter().map(|c| c.right).collect();
        assert_eq!(right, [true, true, false, false]);
        // Of a and b (c costs under 20 %), one is right: 50 %.
        assert_eq!(scores.stragglers_right_pct(), 50.0);
        assert_eq!(scores.false_stragglers(), 0);
        let confusion = scores.confusion();
        assert_eq!(confusion[0], ("compute".to_string(), vec![1, 0, 0, 0, 1]));
        assert_eq!(confusion[1], ("data".to_string(), vec![1, 0, 0, 0, 0]));
        assert_eq!(confusion[3], ("none".to_string(), vec![0, 0, 0, 0, 1]));
        // Advice: a's 60 ms step freed of the 18 ms wait is 42 ms, against
        // the even cell's 40: 40 / 42 − 1 = −4.8 %, right. b's straggler
        // costs the others nothing to wait: 55 ms predicted against 40,
        // −27.3 %, wrong though its rank is right.
        let errors: Vec<Option<f64>> = scores.cells.iter().map(|c| c.advice_error_pct).collect();
        assert!(errors[0].is_none() && errors[3].is_none(), "{errors:?}");
        assert!((errors[1].unwrap() - 100.0 * (40.0 / 42.0 - 1.0)).abs() < 1e-9);
        assert!((errors[2].unwrap() - 100.0 * (40.0 / 55.0 - 1.0)).abs() < 1e-9);
        assert_eq!(scores.advice_within_pct(), 50.0);
        scores.cells[0].named_rank = Some(1);
        assert_eq!(scores.metric("diagnoses.false_stragglers"), Some(1.0));
        // A run without faults is not scored.
        assert!(Scores::of(&[even]).is_none());
    }
}
