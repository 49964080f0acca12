//! A study's claims set against the run: each check's figure for each
//! cell it selects (or its ratio to the cell it is compared with), and
//! whether every one lies within the check's bounds. `report::study` draws
//! them.

use crate::config::{Check, Study, METRICS};
use benchkit_schema::{CellStatus, CellSummary};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Whether the run bears a claim out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Agrees,
    Disagrees,
    /// The medians lie within the bounds but a repeat does not, or the
    /// other way round: more repeats would decide.
    Unclear,
    /// No finished cell gave the figure.
    NotMeasured,
}

/// One judged cell's figure (a ratio when the check compares): the median
/// over its repeats, and the lowest and highest the repeats allow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub cell: String,
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

/// One check's figures and verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    pub says: String,
    /// What was compared, e.g. `images_per_s, data.pipeline=optimized ÷ data.pipeline=naive ≥ 1.00`.
    pub measures: String,
    /// Each selected cell and its figure.
    pub figures: Vec<Figure>,
    pub verdict: Verdict,
}

/// A summary's figure `metric` as (median, min, max) over its repeats; a
/// plain number is all three.
fn figure(summary: &CellSummary, metric: &str) -> Option<(f64, f64, f64)> {
    let value = serde_json::to_value(summary).ok()?;
    // `weak_scaling.efficiency`: a field of a field.
    let field = metric.split('.').try_fold(&value, |v, key| v.get(key))?;
    let get = |k: &str| field.get(k).unwrap_or(field).as_f64().filter(|v| v.is_finite());
    let median = get("median")?;
    Some((median, get("min").unwrap_or(median), get("max").unwrap_or(median)))
}

/// Whether two axis values are the same (1 and 1.0 alike).
fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        (a, b) => a == b,
    }
}

fn matches(summary: &CellSummary, wanted: &std::collections::BTreeMap<String, Value>) -> bool {
    wanted.iter().all(|(k, v)| same(summary.axes.get(k), Some(v)))
}

/// The cell `against` selects for `cell`: the same on every other axis
/// both cells have, leaving out those the check selects by (`selected`).
fn counterpart<'a>(
    cell: &CellSummary,
    selected: &std::collections::BTreeMap<String, Value>,
    against: &std::collections::BTreeMap<String, Value>,
    all: &'a [CellSummary],
) -> Option<&'a CellSummary> {
    all.iter().filter(|c| c.status == CellStatus::Ok && c.cell != cell.cell).find(|other| {
        matches(other, against)
            && cell
                .axes
                .iter()
                .filter(|(k, _)| !against.contains_key(*k) && !selected.contains_key(*k))
                .all(|(k, v)| other.axes.get(k).is_none_or(|o| same(Some(v), Some(o))))
    })
}

fn described(wanted: &std::collections::BTreeMap<String, Value>) -> String {
    let show = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    wanted.iter().map(|(k, v)| format!("{k}={}", show(v))).collect::<Vec<_>>().join(",")
}

fn judge_one(check: &Check, summaries: &[CellSummary]) -> Judged {
    let name = METRICS.iter().find(|(m, _)| *m == check.metric).map_or(check.metric.as_str(), |(_, n)| n);
    let selected = if check.cells.is_empty() { "every cell".to_string() } else { described(&check.cells) };
    let mut measures = match &check.against {
        Some(against) => format!("{name}, {selected} ÷ {}", described(against)),
        None => format!("{name}, {selected}"),
    };
    if let Some(low) = check.at_least {
        measures.push_str(&format!(" ≥ {low}"));
    }
    if let Some(high) = check.at_most {
        measures.push_str(&format!(" ≤ {high}"));
    }
    let mut figures = Vec::new();
    if check.metric.starts_with("diagnoses.") {
        // A figure of the selected cells together, each set against its answer.
        let selected = summaries.iter().filter(|c| matches(c, &check.cells));
        let scores = super::diagnoses::Scores::among(selected, summaries);
        if let Some(value) = scores.metric(&check.metric) {
            figures.push(Figure { cell: selected_cells(&scores), value, low: value, high: value });
        }
    }
    for cell in summaries.iter().filter(|c| c.status == CellStatus::Ok && matches(c, &check.cells)) {
        let Some((value, low, high)) = figure(cell, &check.metric) else { continue };
        let (value, low, high) = match &check.against {
            None => (value, low, high),
            Some(against) => match counterpart(cell, &check.cells, against, summaries)
                .and_then(|o| figure(o, &check.metric))
            {
                Some((base, base_low, base_high)) if base > 0.0 && base_low > 0.0 => {
                    (value / base, low / base_high, high / base_low)
                }
                _ => continue,
            },
        };
        figures.push(Figure { cell: cell.cell.clone(), value, low, high });
    }
    let within = |v: f64| check.at_least.is_none_or(|l| v >= l) && check.at_most.is_none_or(|h| v <= h);
    // Whole ranges decide; a range across a bound leaves the check unclear.
    let inside = |f: &Figure| within(f.low) && within(f.high) && within(f.value);
    let outside = |f: &Figure| !within(f.low) && !within(f.high) && !within(f.value);
    let verdict = match figures.is_empty() {
        true => Verdict::NotMeasured,
        false if figures.iter().any(outside) => Verdict::Disagrees,
        false if figures.iter().all(inside) => Verdict::Agrees,
        false => Verdict::Unclear,
    };
    Judged { says: check.says.clone(), measures, figures, verdict }
}

/// How many cells a run-level figure is over, e.g. `14 cells`.
fn selected_cells(scores: &super::diagnoses::Scores) -> String {
    format!("{} cells", scores.cells.len())
}

/// Every check of `study` against the run's `summaries`.
pub fn judge(study: &Study, summaries: &[CellSummary]) -> Vec<Judged> {
    study.checks.iter().map(|c| judge_one(c, summaries)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchkit_schema::Spread;

    fn cell(id: &str, axes: Value, images_per_s: f64, status: CellStatus) -> CellSummary {
        let summary = serde_json::json!({
            "index": 0, "cell": id, "axes": axes, "status": status, "repeats": 1, "target_reached": 0,
            "outliers": [], "warnings": [],
            "images_per_s": Spread::of(&[images_per_s]),
        });
        serde_json::from_value(summary).unwrap()
    }

    #[test]
    fn repeats_across_a_bound_leave_the_check_unclear() {
        let ok = CellStatus::Ok;
        let repeats = |id: &str, pipeline: &str, samples: &[f64]| {
            let mut c = cell(id, serde_json::json!({ "data.pipeline": pipeline }), 0.0, ok);
            c.images_per_s = Spread::of(samples);
            c
        };
        let faster = |samples: &[f64]| {
            let summaries = [repeats("naive", "naive", &[100.0]), repeats("opt", "optimized", samples)];
            let c = check(
                serde_json::json!({"data.pipeline": "optimized"}),
                Some(serde_json::json!({"data.pipeline": "naive"})),
                1.0,
            );
            judge_one(&c, &summaries)
        };
        let j = faster(&[90.0, 110.0, 130.0]);
        assert_eq!(
            (j.verdict, j.figures[0].value, j.figures[0].low, j.figures[0].high),
            (Verdict::Unclear, 1.1, 0.9, 1.3)
        );
        assert_eq!(faster(&[105.0, 120.0]).verdict, Verdict::Agrees);
        assert_eq!(faster(&[80.0, 95.0]).verdict, Verdict::Disagrees);
    }

    fn study_of(checks: Vec<Check>) -> Study {
        let text = |t: &str| t.to_string();
        Study {
            title: text("t"),
            question: text("q?"),
            claim: text("c."),
            source: None,
            prepare: Vec::new(),
            checks,
        }
    }

    fn values(figures: &[Figure]) -> Vec<(String, f64)> {
        figures.iter().map(|f| (f.cell.clone(), f.value)).collect()
    }

    fn check(cells: Value, against: Option<Value>, at_least: f64) -> Check {
        let map = |v: Value| v.as_object().unwrap().clone().into_iter().collect();
        Check {
            says: "the optimized loader is faster".into(),
            metric: "images_per_s".into(),
            cells: map(cells),
            against: against.map(map),
            at_least: Some(at_least),
            at_most: None,
        }
    }

    #[test]
    fn ratios_pair_cells_that_differ_only_in_the_compared_axes() {
        let ok = CellStatus::Ok;
        let summaries = [
            cell("png,naive", serde_json::json!({"data.path": "png", "data.pipeline": "naive"}), 100.0, ok),
            cell("png,opt", serde_json::json!({"data.path": "png", "data.pipeline": "optimized"}), 250.0, ok),
            cell(
                "shards,naive",
                serde_json::json!({"data.path": "shards", "data.pipeline": "naive"}),
                200.0,
                ok,
            ),
            cell(
                "shards,opt",
                serde_json::json!({"data.path": "shards", "data.pipeline": "optimized"}),
                180.0,
                ok,
            ),
        ];
        let faster = check(
            serde_json::json!({"data.pipeline": "optimized"}),
            Some(serde_json::json!({"data.pipeline": "naive"})),
            1.0,
        );
        let j = &judge_one(&faster, &summaries);
        assert_eq!(values(&j.figures), [("png,opt".to_string(), 2.5), ("shards,opt".to_string(), 0.9)]);
        assert_eq!(j.verdict, Verdict::Disagrees, "one pair is slower");
        assert!(
            j.measures.contains("images/s, data.pipeline=optimized ÷ data.pipeline=naive ≥ 1"),
            "{}",
            j.measures
        );

        let fast_enough = Check { at_least: Some(0.8), ..faster.clone() };
        assert_eq!(judge_one(&fast_enough, &summaries).verdict, Verdict::Agrees);
        // A plain figure, no comparison; a failed cell gives none.
        let mut plain = check(serde_json::json!({"data.path": "png"}), None, 120.0);
        plain.at_most = Some(300.0);
        let j = judge_one(&plain, &summaries);
        assert_eq!(j.figures.len(), 2);
        assert_eq!(j.verdict, Verdict::Disagrees, "100 < 120");
        let failed = [cell("png,opt", serde_json::json!({"data.path": "png"}), 250.0, CellStatus::Failed)];
        assert_eq!(judge_one(&plain, &failed).verdict, Verdict::NotMeasured);

        // Cells of `include` entries name different keys: a pipeline cell
        // pairs with the one-device cell of its model, on the keys both have.
        let included = [
            cell("r1", serde_json::json!({"model.plugin": "resnet", "devices": 1}), 10.0, ok),
            cell("s1", serde_json::json!({"model.plugin": "swin", "devices": 1}), 20.0, ok),
            cell("r-pipe", serde_json::json!({"model.plugin": "resnet", "distributed.stages": 2}), 15.0, ok),
            cell("s-pipe", serde_json::json!({"model.plugin": "swin", "distributed.stages": 2}), 10.0, ok),
        ];
        let pipe =
            check(serde_json::json!({"distributed.stages": 2}), Some(serde_json::json!({"devices": 1})), 1.0);
        let j = judge_one(&pipe, &included);
        assert_eq!(values(&j.figures), [("r-pipe".to_string(), 1.5), ("s-pipe".to_string(), 0.5)]);

        let study = study_of(vec![faster]);
        let judged = judge(&study, &summaries);
        assert_eq!(judged[0].verdict, Verdict::Disagrees);
        assert_eq!(
            values(&judged[0].figures),
            [("png,opt".to_string(), 2.5), ("shards,opt".to_string(), 0.9)]
        );
    }
}
