//! The changes considered for a cell, each predicted from its measured
//! figures by a model of [`super::models`]: more loader workers for an
//! input-bound cell; another bucket size and a larger batch per replica
//! for a communication-bound one; a backend or precision another cell of
//! the run measured faster; and the straggler's machine freed.

use super::change::{change, keys, Context, Predicted};
use super::exchange;
use super::figures::Figures;
use super::models::Loader;
use benchkit_schema::{Change, ChangeKind, InputBound};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Keys another cell of the run may differ in to be advised as measured;
/// those of the replicas' layout (all but the first two) only between cells
/// of as many replicas and the same global batch.
pub const MEASURED_KEYS: [&str; 6] = [
    "backend",
    "train.precision",
    "devices",
    "distributed.processes",
    "distributed.collective",
    "distributed.strategy",
];
/// Reading a folder's files this share of the loader's time or more is
/// worth packing them into shards.
const READ_SHARE: f64 = 0.5;

/// Every change considered for `f` (others: the run's other finished
/// cells), and what could not be considered and why.
pub fn considered(f: &Figures, others: &[Figures], ctx: &Context) -> (Vec<Change>, Vec<String>) {
    let mut notes = Vec::new();
    let mut out: Vec<Change> = loader(f, &mut notes).into_iter().collect();
    if let Some(x) = exchange::exchange(f, ctx, &mut notes) {
        out.extend(exchange::buckets(f, &x, &mut notes));
        out.extend(exchange::batch(f, others, &x, ctx, &mut notes));
    }
    out.extend(measured(f, others));
    out.extend(straggler(f));
    out.sort_by(|a, b| b.gain_pct.total_cmp(&a.gain_pct));
    (out, notes)
}

/// More loader workers, for a cell that waits for data ([`Loader`]).
fn loader(f: &Figures, notes: &mut Vec<String>) -> Option<Change> {
    if f.data_wait_pct() < InputBound::MODERATE_PCT {
        return None;
    }
    let l = &f.first.loader;
    let Some(cores) = f.cores else {
        notes.push("loader workers: the run did not record its machine's cores".into());
        return None;
    };
    let naive = l.pipeline == "naive" || l.workers == 0;
    let c = f.compute_ms;
    if !(c.is_finite() && c >= 0.0 && f.data_wait_ms.is_finite()) {
        notes.push("loader workers: the cell measured no compute time to set the loader against".into());
        return None;
    }
    let (batch_ms, mut uses) = if naive {
        let why = format!(
            "data wait {:.1} ms a step: the step thread builds each batch itself (pipeline = \"naive\")",
            f.data_wait_ms
        );
        (f.data_wait_ms, vec![why])
    } else {
        let t = l.workers as f64 * f.step_ms;
        let why = format!(
            "{} worker(s) delivering a batch each {:.1} ms step: {t:.1} ms of a worker's time a batch",
            l.workers, f.step_ms
        );
        (t, vec![why])
    };
    let stages = format!(
        "the loader's stages a batch: read {:.1} ms, decode {:.1} ms, transform {:.1} ms",
        l.read_ms, l.decode_ms, l.transform_ms
    );
    let staged = l.read_ms + l.decode_ms + l.transform_ms;
    if l.source == "folder" && l.read_ms >= READ_SHARE * staged {
        notes.push(format!(
            "reading takes {:.0} % of the loader's {staged:.1} ms a batch, a file opened an image: record shards \
             (`benchkit shards pack`) read one file a shard; not predicted, as the run read no shards",
            100.0 * l.read_ms / staged
        ));
    }
    let threads = f.first.threads.unwrap_or(cores).clamp(1, cores);
    uses.extend([
        format!("compute {c:.1} ms a step (median)"),
        stages,
        format!("{threads} compute thread(s) on {cores} logical core(s) a process"),
    ]);
    let model = Loader { compute_ms: c, batch_ms, compute_threads: threads, cores };
    let now = if naive { 0 } else { l.workers };
    let (workers, step_w) = model.best((2 * cores).clamp(1, 256));
    if workers <= now {
        notes.push(format!(
            "loader workers: more than {now} are predicted no faster; the {cores} core(s) are busy with compute and loading"
        ));
        return None;
    }
    let step_ms = f.step_ms + step_w - model.step_ms(now);
    let title = if naive {
        format!("data.pipeline = \"optimized\" with {workers} loader worker(s), in place of the step thread loading")
    } else {
        format!("data.workers {now} → {workers}")
    };
    let (set, was) = if naive {
        (
            keys(&[("data.pipeline", json!("optimized")), ("data.workers", json!(workers))]),
            keys(&[("data.pipeline", json!(l.pipeline))]),
        )
    } else {
        (keys(&[("data.workers", json!(workers))]), keys(&[("data.workers", json!(now))]))
    };
    let p = Predicted {
        step_ms,
        images_per_s: f.images_per_s * f.step_ms / step_ms,
        data_wait_ms: (step_w - c).max(0.0),
        exposed_ms: f.exposed_ms,
    };
    let assumptions = vec![
        format!("a worker builds a batch in {batch_ms:.1} ms however many there are"),
        format!(
            "compute stays {c:.1} ms a step, its {threads} thread(s) and the workers sharing {cores} core(s)"
        ),
    ];
    Some(change(f, ChangeKind::LoaderWorkers, title, [set, was], p, uses, assumptions))
}

/// Another cell of the run that differs from `f` only in backend,
/// precision or the layout of the same replicas, measured faster.
fn measured(f: &Figures, others: &[Figures]) -> Vec<Change> {
    let axes = &f.record.axes;
    let mut out = Vec::new();
    for o in others.iter().filter(|o| o.record.cell != f.record.cell && o.images_per_s > f.images_per_s) {
        let keys_of = |m: &serde_json::Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
        if keys_of(axes) != keys_of(&o.record.axes) {
            continue;
        }
        let differ: Vec<&String> = axes.keys().filter(|k| axes.get(*k) != o.record.axes.get(*k)).collect();
        if differ.is_empty() || !differ.iter().all(|k| MEASURED_KEYS.contains(&k.as_str())) {
            continue;
        }
        let same_layout =
            o.replicas() == f.replicas() && o.first.parallel.global_batch == f.first.parallel.global_batch;
        if !same_layout && differ.iter().any(|k| MEASURED_KEYS[2..].contains(&k.as_str())) {
            continue;
        }
        let set: BTreeMap<String, Value> =
            differ.iter().map(|k| (k.to_string(), o.record.axes[*k].clone())).collect();
        let was: BTreeMap<String, Value> = differ.iter().map(|k| (k.to_string(), axes[*k].clone())).collect();
        let words: Vec<String> = set.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        let p = Predicted {
            step_ms: o.step_ms,
            images_per_s: o.images_per_s,
            data_wait_ms: o.data_wait_ms,
            exposed_ms: o.exposed_ms,
        };
        let uses = vec![format!("cell {} measured {:.1} images/s", o.record.cell, o.images_per_s)];
        let assumptions = vec!["the other cell's measurement holds for this one".into()];
        out.push(change(f, ChangeKind::Measured, words.join(", "), [set, was], p, uses, assumptions));
    }
    out
}

/// The straggler's machine freed: the others stop waiting for it.
fn straggler(f: &Figures) -> Option<Change> {
    let s = f.first.parallel.straggler.as_ref()?;
    let step_ms = s.freed_step_ms(f.step_ms);
    // The step's shortening comes out of the all-reduce it waited at; a
    // late loader's wait falls to the others'.
    let data_wait_ms = match s.cause {
        benchkit_schema::StragglerCause::Data => f.data_wait_ms.min(s.others_data_wait_p50_ms.max(0.0)),
        _ => f.data_wait_ms,
    };
    let p = Predicted {
        step_ms,
        images_per_s: f.images_per_s * f.step_ms / step_ms,
        data_wait_ms,
        exposed_ms: (f.exposed_ms - (f.step_ms - step_ms)).max(0.0),
    };
    let title = format!("free the machine of {} (its load, data or device)", s.who());
    let uses = vec![s.evidence()];
    let assumptions = vec![
        "the straggler then arrives with the others and no rank waits for it; a compute straggler's all-reduces speed up as its work does; on a machine whose ranks share cores, the others slow as it takes back the share it left them".into(),
        "no config key makes this change: --verify cannot measure it; the same cell without its injected faults, where the run holds one, does".into(),
    ];
    Some(change(f, ChangeKind::Straggler, title, [BTreeMap::new(), BTreeMap::new()], p, uses, assumptions))
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchkit_schema::CellRecord;

    fn record(cell: &str, axes: &[(&str, Value)], replicas: usize, step_s: f64) -> CellRecord {
        let mut repeat = crate::analysis::sample_result(cell, 1, 64, 64, step_s);
        (repeat.parallel.replicas, repeat.parallel.global_batch) = (replicas, 64);
        let mut record = crate::analysis::sample_record(cell, repeat);
        record.axes = axes.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        record
    }

    #[test]
    fn another_layout_of_as_many_replicas_measured_faster_is_a_change() {
        let layout = |p: usize, d: usize| [("distributed.processes", json!(p)), ("devices", json!(d))];
        let cells = [
            record("2x1", &layout(2, 1), 2, 0.2),
            record("1x2", &layout(1, 2), 2, 0.1),
            // Faster still, but with twice the replicas: not the same cell laid out otherwise.
            record("1x4", &layout(1, 4), 4, 0.05),
        ];
        let figures: Vec<Figures> =
            cells.iter().map(|r| Figures::of(r, Some(2), Some(8.0)).unwrap()).collect();
        let changes = measured(&figures[0], &figures);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].set, keys(&[("devices", json!(2)), ("distributed.processes", json!(1))]));
        assert_eq!(changes[0].was["devices"], json!(1));
        let expect = 100.0 * (figures[1].images_per_s / figures[0].images_per_s - 1.0);
        assert!(expect > 50.0 && (changes[0].gain_pct - expect).abs() < 1e-9, "{expect}");
        assert!(measured(&figures[1], &figures).is_empty(), "the slower layout is no change for the faster");
    }
}
