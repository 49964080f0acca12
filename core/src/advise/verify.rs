//! Each advised change against what the follow-up run measured: the
//! follow-up cell that made it found by its keys, its figures, the error
//! of the predicted images/s, and where it missed by more than the cell's
//! noise, which assumption the measurement broke.

use super::figures::Figures;
use super::follow_up::{self, Entry};
use benchkit_schema::advice::{error_pct, TOLERANCE_PCT};
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
    let error = error_pct(&change.predicted, got, before, None);
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
        ChangeKind::LoaderWorkers => loader_missed(p, got),
        ChangeKind::Straggler => straggler_missed(p, got),
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
        _ => format!(
            "step {:.1} ms against {:.1} ms predicted: the model's assumptions above",
            got.step_ms, p.step_ms
        ),
    }
}

/// Where the loader model missed, in the direction it missed: the part of
/// the step (its compute, or its wait for data) that moved the same way as
/// the step against the prediction, the one that moved most.
///
/// Formula: wait = step × data wait %, compute = step − wait, each measured and predicted; the
/// part named is the one whose difference has the step's sign and is the larger.
fn loader_missed(p: &Measured, got: &Measured) -> String {
    let wait = |m: &Measured| m.step_ms * m.data_wait_pct / 100.0;
    let (w_got, w_p) = (wait(got), wait(p));
    let (c_got, c_p) = (got.step_ms - w_got, p.step_ms - w_p);
    let slower = got.step_ms > p.step_ms;
    // Each part's move in the step's direction (positive when it moved that way).
    let sign = if slower { 1.0 } else { -1.0 };
    let (dc, dw) = (sign * (c_got - c_p), sign * (w_got - w_p));
    let step = format!("step {:.1} ms against {:.1} ms predicted", got.step_ms, p.step_ms);
    match (slower, dw > dc) {
        (true, true) => format!(
            "{step}, its data wait {w_got:.1} ms against {w_p:.1} ms: the workers built batches slower together than one did alone"
        ),
        (true, false) => format!(
            "{step}, its compute {c_got:.1} ms against {c_p:.1} ms: compute slowed, the workers taking its cores"
        ),
        (false, true) => format!(
            "{step}, its data wait {w_got:.1} ms against {w_p:.1} ms: the workers kept up better than one batch's CPU time over the cores allowed (the compute and the workers shared the cores better than the model's bound)"
        ),
        (false, false) => format!(
            "{step}, its compute {c_got:.1} ms against {c_p:.1} ms: the compute measured while the step thread also loaded was slower than the compute alone (loading between steps left it cold caches and fresh memory)"
        ),
    }
}

/// Where freeing the straggler missed: of the step's parts (its data
/// wait, its exposed communication and the work left), the one that moved
/// most the way the step did against the prediction.
///
/// Formula: wait = step × data wait %, exposed = step × exposed %, work = step − wait − exposed,
/// each measured and predicted; the part named has the largest difference of the step's sign.
fn straggler_missed(p: &Measured, got: &Measured) -> String {
    let parts = |m: &Measured| {
        let (wait, exposed) =
            (m.step_ms * m.data_wait_pct / 100.0, m.step_ms * m.exposed_communication_pct / 100.0);
        [("data wait", wait), ("exposed communication", exposed), ("work", m.step_ms - wait - exposed)]
    };
    let sign = if got.step_ms > p.step_ms { 1.0 } else { -1.0 };
    let moved = parts(got)
        .into_iter()
        .zip(parts(p))
        .map(|((name, g), (_, q))| (name, g, q))
        .max_by(|a, b| (sign * (a.1 - a.2)).total_cmp(&(sign * (b.1 - b.2))));
    let step = format!("step {:.1} ms against {:.1} ms predicted", got.step_ms, p.step_ms);
    match moved {
        Some((name, g, q)) if got.step_ms > p.step_ms => format!(
            "{step}, its {name} {g:.1} ms against {q:.1} ms: freed, the {name} did not fall as far as the model \
             assumes (on a machine whose ranks share cores, the others gave back more of the share the slowed \
             rank had left them)"
        ),
        Some((name, g, q)) => format!(
            "{step}, its {name} {g:.1} ms against {q:.1} ms: freed, the {name} fell further than the model \
             assumes (the fault slowed more of the step than the straggler's arrival and its own all-reduces)"
        ),
        None => step,
    }
}

/// For a cell run with injected faults, its straggler change against the
/// same cell without them in the same run (`all`): that cell measures what
/// freeing the straggler's machine would give. Its error is [`error_pct`]
/// with no remeasurement, both cells measured in one run.
pub fn against_even(cell: &mut CellAdvice, f: &Figures, all: &[Figures]) {
    if f.first.faults.is_none() {
        return;
    }
    let Some(even) = all.iter().find(|o| {
        o.first.faults.is_none() && benchkit_schema::same_but_faults(&o.record.axes, &f.record.axes)
    }) else {
        return;
    };
    let (got, noise_pct, noise) = (even.measured(), repeats_noise_pct(even.record), cell.noise_pct);
    let changes = cell.advised.iter_mut().chain(cell.not_advised.iter_mut());
    for change in changes.filter(|c| c.kind == ChangeKind::Straggler) {
        let error_pct = error_pct(&change.predicted, &got, &cell.measured, None);
        let within_band = error_pct.abs() <= noise;
        change.verified = Some(Verification {
            cell: even.record.cell.clone(),
            measured: got.clone(),
            error_pct,
            within_band,
            why: (!within_band).then(|| model_broke(change, &got)),
            noise_pct,
            scored: noise_pct.is_nan() || noise_pct <= TOLERANCE_PCT,
        });
    }
}

/// The measured side's own noise: half the range of `record`'s repeats'
/// images/s over their median, in percent; NaN with fewer than two.
///
/// Formula: 100 × (max − min) / (2 × median) of the repeats' images/s.
pub fn repeats_noise_pct(record: &CellRecord) -> f64 {
    let ips: Vec<f64> = record.repeats.iter().map(|r| r.images_per_s).collect();
    benchkit_schema::Spread::of(&ips).map_or(f64::NAN, |s| 100.0 * s.half_range())
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
    let measured = |entry: &Entry| -> Result<(String, Measured, f64), String> {
        let record = find(records, entry).ok_or("the follow-up run has no such cell")?;
        let f = Figures::of(record, cores, memory).ok_or_else(|| match record.failures.last() {
            Some(f) => format!("it failed: {}", f.reason),
            None => "it did not finish".into(),
        })?;
        Ok((record.cell.clone(), f.measured(), repeats_noise_pct(record)))
    };
    let before = cell.measured.clone();
    cell.remeasured = measured(&follow_up::baseline(cell)).ok().map(|(_, m, _)| m);
    let noise = cell.noise_pct;
    let entries: Vec<Entry> = cell.advised.iter().map(|c| follow_up::changed(cell, c)).collect();
    let again = cell.remeasured.clone();
    for (change, entry) in cell.advised.iter_mut().zip(entries) {
        if change.set.is_empty() || found_only && find(records, &entry).is_none() {
            continue;
        }
        change.verified = Some(match measured(&entry) {
            Ok((id, got, noise_pct)) => {
                let error_pct = error_pct(&change.predicted, &got, &before, again.as_ref());
                let within_band = error_pct.abs() <= noise;
                let why = (!within_band).then(|| why(change, &got, again.as_ref(), &before, noise));
                let scored = noise_pct.is_nan() || noise_pct <= TOLERANCE_PCT;
                Verification { cell: id, measured: got, error_pct, within_band, why, noise_pct, scored }
            }
            Err(e) => Verification {
                cell: String::new(),
                measured: Measured::default(),
                error_pct: f64::NAN,
                within_band: false,
                why: Some(e),
                noise_pct: f64::NAN,
                scored: false,
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_loader_miss_is_explained_by_the_part_that_moved_the_way_the_step_did() {
        let m = |step_ms: f64, data_wait_pct: f64| Measured { step_ms, data_wait_pct, ..Measured::default() };
        // Predicted 56.1 ms with 25 % data wait (14.0 ms wait, 42.1 ms compute).
        let p = m(56.1, 25.0);
        // Faster: 53.4 ms, no wait. Compute rose 11.3 ms, the wait fell 14.0: the wait explains it.
        let why = loader_missed(&p, &m(53.4, 0.0));
        assert!(why.starts_with("step 53.4 ms against 56.1 ms predicted, its data wait 0.0 ms against 14.0 ms: the workers kept up"), "{why}");
        // Faster: 40 ms with 30 % wait (12 ms, 28 ms compute): compute fell 14.1, wait 2.0 → compute.
        let why = loader_missed(&p, &m(40.0, 30.0));
        assert!(
            why.contains(
                "its compute 28.0 ms against 42.1 ms: the compute measured while the step thread also loaded"
            ),
            "{why}"
        );
        // Slower: 70 ms with 20 % wait (14 ms, 56 ms compute): compute rose 13.9 → compute slowed.
        let why = loader_missed(&p, &m(70.0, 20.0));
        assert!(
            why.contains("its compute 56.0 ms against 42.1 ms: compute slowed, the workers taking its cores"),
            "{why}"
        );
        // Slower: 70 ms with 50 % wait (35 ms, 35 ms compute): the wait rose 21 → the workers.
        let why = loader_missed(&p, &m(70.0, 50.0));
        assert!(
            why.contains("its data wait 35.0 ms against 14.0 ms: the workers built batches slower"),
            "{why}"
        );
    }

    #[test]
    fn a_freed_straggler_miss_is_explained_by_the_part_that_moved_the_way_the_step_did() {
        let m = |step_ms: f64, data_wait_pct: f64, exposed_communication_pct: f64| Measured {
            step_ms,
            data_wait_pct,
            exposed_communication_pct,
            ..Measured::default()
        };
        // Predicted 40 ms: 10 ms exposed (25 %), 30 ms work.
        let p = m(40.0, 0.0, 25.0);
        // Faster, 34 ms with 5 ms exposed and 29 ms work: the all-reduce fell 5, the work 1.
        let why = straggler_missed(&p, &m(34.0, 0.0, 500.0 / 34.0));
        assert!(why.starts_with("step 34.0 ms against 40.0 ms predicted, its exposed communication 5.0 ms against 10.0 ms: freed, the exposed communication fell further"), "{why}");
        // Slower, 50 ms with 10 ms exposed and 40 ms work: the work rose 10.
        let why = straggler_missed(&p, &m(50.0, 0.0, 20.0));
        assert!(
            why.contains("its work 40.0 ms against 30.0 ms: freed, the work did not fall as far"),
            "{why}"
        );
    }

    #[test]
    fn a_measurements_own_noise_is_half_its_repeats_range_over_their_median() {
        let record = |ips: &[f64]| {
            let mut r: CellRecord = serde_json::from_value(json!({"index": 0, "cell": "c", "axes": {},
                "repeats_asked": 3, "repeats": [], "failures": [], "summary": null}))
            .unwrap();
            r.repeats = ips
                .iter()
                .map(|&x| benchkit_schema::CellResult {
                    images_per_s: x,
                    ..crate::analysis::sample_result("c", 1, 8, 8, 0.1)
                })
                .collect();
            r
        };
        // 90, 100, 120 images/s: (120 − 90) / (2 × 100) = 15 %.
        assert!((repeats_noise_pct(&record(&[90.0, 100.0, 120.0])) - 15.0).abs() < 1e-9);
        assert!(repeats_noise_pct(&record(&[100.0])).is_nan(), "one repeat tells no noise");
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
