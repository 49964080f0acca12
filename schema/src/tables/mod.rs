//! The tables a run's reports show, each defined once (the cells table in
//! [`cells`]): the terminal (`benchkit run`, `report`) and the reporter
//! plugins (Markdown, HTML, through the SDK) each draw these rows in their
//! own markup. A header names its column's unit; a cell holds the figure.

pub mod cells;
pub mod label;
pub mod notes;
pub mod ops;
pub mod panels;
pub mod suspect;

pub use cells::{
    cells, finished, headers, input_bound, reference, rel_note, workload_references, CellsTable,
};
pub use notes::{notes, Note};
pub use ops::{op_tables, OpTables};
pub use panels::{panels, PANEL_RATIO};
pub use suspect::suspect;

use crate::{CellSummary, Phase};

/// Where every figure is defined: the Figures page of benchkit's book,
/// in its repository (`mdbook build docs` renders it as
/// `docs/book/concepts/figures.html`).
pub const FIGURES_PAGE: &str = "docs/src/concepts/figures.md";

/// The line under a cells table that says where its columns are defined.
pub const FIGURES_NOTE: &str =
    "figures: every column is defined, with its formula, in benchkit's book (docs/src/concepts/figures.md)";

/// The anchor mdBook gives a heading of text `header` (a column's entry on
/// the Figures page is its header in a code span, whose backticks drop):
/// letters and digits lower-cased, `-` and `_` kept, spaces to `-`,
/// anything else dropped (`img/s` gives `imgs`, `data wait %` gives
/// `data-wait-`).
pub fn figure_anchor(header: &str) -> String {
    header
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => c.to_lowercase().next(),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// What the seeds table shows, for under it.
pub const SEEDS_NOTE: &str = "Seeds: each cell trained with the config's seed and the ones after it. Across seeds: each seed's median over its repeats (the training's own variance); between repeats: the median over seeds of the MAD across one seed's repeats (the machine's noise).";

/// What the step phases table shows, for under it.
pub const PHASES_NOTE: &str = "Step phases: mean milliseconds per profiled step (every other measured step of a cell with profile = true), the device synchronised at each phase edge. Profiling cost: the profiled step against the plain steps interleaved with it, which give the cell's headline figures. Rank spread: the slowest rank's forward + backward + optimizer over the fastest's.";

/// The seeds table (header, then one row per cell trained with several
/// seeds): accuracy and time to target across seeds (each seed's median
/// over its repeats), beside the spread between repeats of one seed.
pub fn seeds(cells: &[&CellSummary]) -> Option<Vec<Vec<String>>> {
    let seeded: Vec<_> = cells.iter().filter_map(|s| Some((*s, s.seeds.as_ref()?))).collect();
    if seeded.is_empty() {
        return None;
    }
    let header = [
        "cell",
        "seeds",
        "test acc % (median)",
        "across seeds (min–max)",
        "between repeats (MAD)",
        "time to target s (median)",
        "across seeds (min–max)",
        "seeds reaching target",
    ];
    let mut rows = vec![header.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
    for (s, x) in seeded {
        let a = &x.final_test_accuracy;
        rows.push(vec![
            s.shown().to_string(),
            x.seeds.to_string(),
            format!("{:.2}", 100.0 * a.median),
            format!("{:.2}–{:.2}", 100.0 * a.min, 100.0 * a.max),
            format!("{:.2}", 100.0 * x.accuracy_repeat_mad),
            x.time_to_target_s.map_or("-".into(), |t| format!("{:.1}", t.median)),
            x.time_to_target_s.map_or("-".into(), |t| format!("{:.1}–{:.1}", t.min, t.max)),
            match s.target_accuracy {
                Some(_) => format!("{}/{}", x.target_reached_seeds, x.seeds),
                None => "-".into(),
            },
        ]);
    }
    Some(rows)
}

/// The step phases table (header, then one row per profiled cell): each
/// phase's milliseconds and share of the profiled step, the profiling
/// cost, and, where several ranks were profiled, their spread.
pub fn phases(cells: &[&CellSummary]) -> Option<Vec<Vec<String>>> {
    let profiled: Vec<_> = cells.iter().filter_map(|s| Some((*s, s.phases.as_ref()?))).collect();
    if profiled.is_empty() {
        return None;
    }
    let spread = profiled.iter().any(|(s, _)| s.rank_spread.is_some());
    let mut header = vec!["cell".to_string()];
    header.extend(Phase::ALL.iter().map(|p| format!("{} ms", p.label())));
    header.extend(["profiled step ms".into(), "profiling cost %".into()]);
    if spread {
        header.push("rank spread".into());
    }
    let mut rows = vec![header];
    for (s, p) in profiled {
        let mut row = vec![s.shown().to_string()];
        row.extend(Phase::ALL.iter().map(|&ph| format!("{:.2} ({:.0} %)", p.get(ph), p.pct(ph))));
        row.push(format!("{:.2}", p.step_ms));
        row.push(if p.overhead_pct.is_finite() { format!("{:+.1}", p.overhead_pct) } else { "-".into() });
        if spread {
            row.push(
                s.rank_spread
                    .as_ref()
                    .map_or("-".into(), |r| format!("{:.2}× (rank {} slowest)", r.ratio, r.slowest_rank)),
            );
        }
        rows.push(row);
    }
    Some(rows)
}

/// A cell summary with nothing measured (model `lenet` on `flex`, batch
/// 64, one repeat), for tests to fill in.
#[cfg(test)]
pub(crate) fn bare_summary(cell: &str) -> CellSummary {
    serde_json::from_value(serde_json::json!({"index": 0, "cell": cell, "axes": {}, "status": "ok",
        "reason": null, "model": "lenet", "backend": "flex", "batch_size": 64, "params": 10,
        "repeats": 1, "images_per_s": null, "step_p50_ms": null, "step_p90_ms": null,
        "step_p99_ms": null, "data_wait_pct": null, "compute_p50_ms": null,
        "final_test_accuracy": null, "target_accuracy": null, "target_reached": 0,
        "time_to_target_s": null, "usd_per_epoch": null, "usd_to_target": null,
        "outliers": [], "warnings": []}))
    .expect("a minimal cell summary")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RankSpread, StepPhases};

    fn profiled(cell: &str, spread: Option<f64>) -> CellSummary {
        let mut s = CellSummary::of(0, cell, &Default::default(), &[], None);
        s.phases = Some(StepPhases {
            steps: 4,
            ms: [1.0, 0.0, 3.0, 5.0, 0.5, 0.5, 0.0],
            step_ms: 10.0,
            plain_step_ms: 9.5,
            overhead_pct: 5.263,
        });
        s.rank_spread = spread.map(|ratio| RankSpread { ratio, slowest_rank: 1, fastest_rank: 0 });
        s
    }

    #[test]
    fn each_phase_shows_its_ms_and_share_and_rank_spread_only_where_ranks_were_profiled() {
        let one = profiled("a", None);
        let rows = phases(&[&one]).expect("a profiled cell");
        assert_eq!(rows[0].len(), 1 + Phase::ALL.len() + 2, "no rank spread column: {:?}", rows[0]);
        assert_eq!(rows[0][5], "exposed comm. ms");
        assert_eq!(rows[1][3], "3.00 (30 %)", "forward: 3 ms of 10");
        assert_eq!(rows[1][9], "+5.3");
        let two = profiled("b", Some(1.25));
        let rows = phases(&[&one, &two]).expect("profiled cells");
        assert_eq!((rows[1][10].as_str(), rows[2][10].as_str()), ("-", "1.25× (rank 1 slowest)"));
        assert!(phases(&[]).is_none() && seeds(&[&one]).is_none());
    }
}
