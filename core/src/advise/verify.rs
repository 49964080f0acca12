//! Each advised change against what the follow-up run measured: the
//! follow-up cell that made it found by its keys, its figures, the error
//! of the predicted images/s, and where it missed by more than the cell's
//! noise, which assumption the measurement broke.

use super::figures::Figures;
use super::follow_up::{self, Entry};
use benchkit_schema::{CellAdvice, CellRecord, Change, ChangeKind, Measured, Verification};
use serde_json::Value;

/// Whether two config values are the same (numbers by value: `2` is `2.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(1.0),
        _ => a == b,
    }
}

/// Whether the follow-up cell's value `got` of `key` is `want`: the same,
/// or, for a path the follow-up config made absolute, `want` at its end.
fn holds(key: &str, got: &Value, want: &Value) -> bool {
    fn path_of(v: &Value) -> Option<&std::path::Path> {
        v.as_str().map(std::path::Path::new)
    }
    same(got, want)
        || follow_up::PATH_KEYS.contains(&key)
            && path_of(got).zip(path_of(want)).is_some_and(|(g, w)| {
                // `./imgs` stands in the follow-up as `<dir>/./imgs`, whose `.` a path drops.
                let w: std::path::PathBuf =
                    w.components().filter(|c| *c != std::path::Component::CurDir).collect();
                w.is_relative() && g.ends_with(&w)
            })
}

/// The follow-up run's cell whose axes hold every key of `entry` at its value.
fn find<'a>(records: &'a [CellRecord], entry: &Entry) -> Option<&'a CellRecord> {
    records.iter().find(|r| entry.iter().all(|(k, v)| r.axes.get(k).is_some_and(|got| holds(k, got, v))))
}

/// The prediction's error against the measurement: `(predicted − measured)
/// / measured` images/s, in percent.
pub fn error_pct(predicted: &Measured, measured: &Measured) -> f64 {
    100.0 * (predicted.images_per_s - measured.images_per_s) / measured.images_per_s
}

/// Which assumption of `change` the measurement `got` broke, the cell as
/// it ran measuring `again` in the same follow-up run against `before`
/// at first.
fn why(
    change: &Change,
    got: &Measured,
    again: Option<&Measured>,
    before: &Measured,
    noise_pct: f64,
) -> String {
    let error = error_pct(&change.predicted, got);
    let drift = again.map_or(0.0, |a| 100.0 * (a.images_per_s / before.images_per_s - 1.0));
    let drifted = format!(
        "the cell as it ran measured {:.1} images/s in the follow-up run against {:.1} at first ({drift:+.0} %): the \
         machine's speed changed between the runs",
        again.map_or(f64::NAN, |a| a.images_per_s),
        before.images_per_s
    );
    if drift.abs() > noise_pct && drift.abs() >= error.abs() / 2.0 {
        return drifted;
    }
    let why = model_broke(change, got);
    if drift.abs() > noise_pct {
        format!("{why}; and {drifted}")
    } else {
        why
    }
}

/// Which of the model's assumptions `got` broke.
fn model_broke(change: &Change, got: &Measured) -> String {
    let p = &change.predicted;
    match change.kind {
        ChangeKind::LoaderWorkers if got.data_wait_pct > p.data_wait_pct + 5.0 => format!(
            "data wait {:.1} % of the step against {:.1} % predicted: the workers built batches slower together \
             than one did alone",
            got.data_wait_pct, p.data_wait_pct
        ),
        ChangeKind::LoaderWorkers => format!(
            "step {:.1} ms against {:.1} ms predicted with data wait {:.1} %: compute slowed, the workers taking \
             its cores",
            got.step_ms, p.step_ms, got.data_wait_pct
        ),
        ChangeKind::BucketSize | ChangeKind::Batch => {
            let exposed = |m: &Measured| m.exposed_communication_pct / 100.0 * m.step_ms;
            let (e_got, e_p) = (exposed(got), exposed(p));
            let (o_got, o_p) = (got.step_ms - e_got, p.step_ms - e_p);
            if (e_got - e_p).abs() >= (o_got - o_p).abs() {
                format!(
                    "exposed communication {e_got:.1} ms a step against {e_p:.1} ms predicted: the link model (its \
                     latency, or the rate the collective achieved) does not hold at this setting"
                )
            } else {
                format!(
                    "the step outside the exchange {o_got:.1} ms against {o_p:.1} ms predicted, the exchange as \
                     predicted ({e_got:.1} ms exposed): the time an image is not what was assumed at this batch"
                )
            }
        }
        _ => format!("step {:.1} ms against {:.1} ms predicted: the model's assumptions above", got.step_ms, p.step_ms),
    }
}

/// Check `cell`'s advised changes against the follow-up run's `records`;
/// with `found_only`, only those it holds a cell for (an earlier
/// verification read again), the others left unmeasured.
pub fn cell(
    cell: &mut CellAdvice,
    records: &[CellRecord],
    cores: Option<usize>,
    memory: Option<f64>,
    found_only: bool,
) {
    let measured = |entry: &Entry| -> Result<(String, Measured), String> {
        let record = find(records, entry).ok_or("the follow-up run has no such cell")?;
        let f = Figures::of(record, cores, memory).ok_or_else(|| match record.failures.last() {
            Some(f) => format!("it failed: {}", f.reason),
            None => "it did not finish".into(),
        })?;
        Ok((record.cell.clone(), f.measured()))
    };
    let before = cell.measured.clone();
    cell.remeasured = measured(&follow_up::baseline(cell)).ok().map(|(_, m)| m);
    let noise = cell.noise_pct;
    let entries: Vec<Entry> = cell.advised.iter().map(|c| follow_up::changed(cell, c)).collect();
    let again = cell.remeasured.clone();
    for (change, entry) in cell.advised.iter_mut().zip(entries) {
        if change.set.is_empty() || found_only && find(records, &entry).is_none() {
            continue;
        }
        change.verified = Some(match measured(&entry) {
            Ok((id, got)) => {
                let error_pct = error_pct(&change.predicted, &got);
                let within_band = error_pct.abs() <= noise;
                let why = (!within_band).then(|| why(change, &got, again.as_ref(), &before, noise));
                Verification { cell: id, measured: got, error_pct, within_band, why }
            }
            Err(e) => Verification {
                cell: String::new(),
                measured: Measured::default(),
                error_pct: f64::NAN,
                within_band: false,
                why: Some(e),
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_error_is_of_the_predicted_images_per_second_against_the_measured() {
        let m = |ips: f64| Measured { images_per_s: ips, ..Measured::default() };
        assert!((error_pct(&m(110.0), &m(100.0)) - 10.0).abs() < 1e-12);
        assert!((error_pct(&m(80.0), &m(100.0)) + 20.0).abs() < 1e-12);
    }

    #[test]
    fn a_path_made_absolute_still_matches_as_written() {
        let (got, want) = (json!("/c/studies/../../results/png"), json!("../../results/png"));
        assert!(holds("data.path", &got, &want));
        assert!(!holds("data.path", &got, &json!("../results/shards")));
        assert!(holds("data.path", &json!("/c/./imgs"), &json!("./imgs")));
        assert!(!holds("data.source", &json!("/x/folder"), &json!("folder")), "only path keys");
    }

    #[test]
    fn numbers_match_by_value_and_strings_exactly() {
        assert!(same(&json!(2), &json!(2.0)));
        assert!(!same(&json!(2), &json!(3)));
        assert!(same(&json!("gloo"), &json!("gloo")));
        assert!(!same(&json!("2"), &json!(2)));
    }
}
