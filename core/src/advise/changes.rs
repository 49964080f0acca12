//! The changes considered for a cell, each predicted from its measured
//! figures by a model of [`super::models`]: more loader workers for an
//! input-bound cell; another bucket size and a larger batch per replica
//! for a communication-bound one; a backend or precision another cell of
//! the run measured faster; and the straggler's machine freed.

use super::figures::Figures;
use super::models::{self, Exchange, Loader};
use crate::predict::{links, Link};
use benchkit_schema::{Change, ChangeKind, InputBound, Measured};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// Bucket sizes swept, in MiB (the gradient in one piece is swept too).
pub const BUCKET_SWEEP_MIB: [f64; 11] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 25.0, 32.0, 64.0, 128.0];
/// Factors of the batch per replica considered: where the run measured the
/// step at other batches, up to twice the largest it measured; where it did
/// not, the first two only, the step outside the exchange taken as
/// proportional to the images, which holds less the further the batch
/// moves from the one measured.
pub const BATCH_TIMES: [usize; 3] = [2, 4, 8];
/// Keys a cell of the run may differ in from another and still measure how
/// the step outside the exchange grows with the batch.
pub const BATCH_SIBLING_KEYS: [&str; 5] =
    ["train.batch_per_replica", "train.batch_size", "train.lr", "distributed.link", "distributed.bucket_mib"];
/// Keys another cell of the run may differ in to be advised as measured.
pub const MEASURED_KEYS: [&str; 2] = ["backend", "train.precision"];
/// Of the machine's memory, the share a larger batch's peak may take.
const MEMORY_SHARE: f64 = 0.9;

/// What the changes need beside the cell's figures.
pub struct Context<'a> {
    /// The key the cell's batch is set by: `train.batch_per_replica`, or
    /// `train.batch_size` (the global batch).
    pub batch_key: &'a str,
    /// Where a relative path the run recorded is resolved from.
    pub config_dir: Option<&'a Path>,
}

/// A predicted step and what it would measure.
struct Predicted {
    step_ms: f64,
    images_per_s: f64,
    data_wait_ms: f64,
    exposed_ms: f64,
}

/// A change to `f`, with its prediction, the figures it used and its assumptions.
fn change(
    f: &Figures,
    kind: ChangeKind,
    title: String,
    keys: [BTreeMap<String, Value>; 2],
    p: Predicted,
    uses: Vec<String>,
    assumptions: Vec<String>,
) -> Change {
    let [set, was] = keys;
    Change {
        kind,
        title,
        set,
        was,
        predicted: Measured {
            images_per_s: p.images_per_s,
            step_ms: p.step_ms,
            data_wait_pct: 100.0 * p.data_wait_ms / p.step_ms,
            exposed_communication_pct: 100.0 * p.exposed_ms / p.step_ms,
        },
        gain_pct: 100.0 * (p.images_per_s / f.images_per_s - 1.0),
        uses,
        assumptions,
        curve: Vec::new(),
        verified: None,
    }
}

fn keys(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// Every change considered for `f` (others: the run's other finished
/// cells), and what could not be considered and why.
pub fn considered(f: &Figures, others: &[Figures], ctx: &Context) -> (Vec<Change>, Vec<String>) {
    let mut notes = Vec::new();
    let mut out: Vec<Change> = loader(f, &mut notes).into_iter().collect();
    if let Some(x) = exchange(f, ctx, &mut notes) {
        out.extend(buckets(f, &x, &mut notes));
        out.extend(batch(f, others, &x, ctx, &mut notes));
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
            keys(&[("data.pipeline", json!("naive"))]),
        )
    } else {
        (keys(&[("data.workers", json!(workers))]), keys(&[("data.workers", json!(now))]))
    };
    let p = Predicted {
        step_ms,
        images_per_s: f.images_per_s * f.step_ms / step_ms,
        data_wait_ms: (batch_ms / workers as f64 - c).max(0.0),
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

/// The link a multi-replica cell's gradients crossed: the sweep its
/// config named, else its emulated link's rate, else the busbw it
/// measured itself; and the figure it came from.
fn link_of(f: &Figures, ctx: &Context) -> Result<(Link, String), String> {
    let comm = f.first.parallel.communication.as_ref().ok_or("no communication figures were recorded")?;
    if let Some(share) = &comm.link {
        let given = Path::new(&share.file);
        let path = match ctx.config_dir {
            Some(dir) if !given.exists() => dir.join(given),
            _ => given.to_path_buf(),
        };
        let link = links::measured(&path)?;
        return Ok((link, format!("the link's sweep {}", share.file)));
    }
    if let Some(link) = f.first.parallel.link.as_deref().filter(|l| *l != "host").and_then(links::preset) {
        let what = format!("the emulated link's rate {}", link.name);
        return Ok((link, what));
    }
    if comm.busbw_gbps > 0.0 && comm.busbw_gbps.is_finite() {
        let mut link = links::preset("1gbit").ok_or("no link preset")?;
        link.bytes_per_s = comm.busbw_gbps * 1e9;
        link.name = format!("{:.3} GB/s", comm.busbw_gbps);
        return Ok((link, format!("the cell's own busbw {:.3} GB/s", comm.busbw_gbps)));
    }
    Err("neither the link nor the cell's bus bandwidth is known".into())
}

/// The exchange model of a multi-replica cell, calibrated to its measured all-reduce.
fn exchange(
    f: &Figures,
    ctx: &Context,
    notes: &mut Vec<String>,
) -> Option<(Exchange, Vec<String>, Vec<String>)> {
    if f.replicas() < 2 {
        return None;
    }
    let (link, source) = match link_of(f, ctx) {
        Ok(found) => found,
        Err(why) => {
            notes.push(format!("communication: {why}"));
            return None;
        }
    };
    let comm = f.first.parallel.communication.as_ref()?;
    let bucket_total: f64 = comm.bucket_bytes.iter().map(|&b| b as f64).sum();
    let gradient = (f.first.parallel.gradient_bytes_per_step as f64).max(bucket_total);
    let (backward_ms, profiled) = f.backward_ms();
    let mut x = Exchange {
        replicas: f.replicas(),
        backward_ms,
        gradient_bytes: gradient,
        link: link.clone(),
        overlapped: comm.overlapped,
        achieved: 1.0,
    };
    let model: f64 = x.times_ms(&x.buckets(comm.bucket_mib)).iter().sum();
    let total = comm.total_ms.p50;
    if total.is_finite() && total > 0.0 && model > 0.0 {
        x.achieved = total / model;
    }
    let uses = vec![
        format!("{} replicas exchanging {:.2} MB of gradients a step", x.replicas, gradient / 1e6),
        format!("all-reduce {total:.1} ms a step (p50), {:.1} ms of it exposed", f.exposed_ms),
        format!("backward pass {backward_ms:.1} ms a step{}", if profiled { " (profiled)" } else { "" }),
        format!("{source}: {}", link.describe()),
    ];
    let mut assumptions = vec![
        format!(
            "ring all-reduce, each bucket its own, at {:.2}× the link's model time (what the cell's all-reduces took)",
            x.achieved
        ),
        if x.overlapped {
            "each bucket goes out once the backward pass has produced it, gradients coming out evenly".into()
        } else {
            "every all-reduce after the backward pass, as the cell ran them".into()
        },
    ];
    if !profiled {
        assumptions.push("the backward pass two thirds of the work: the cell was not profiled".into());
    }
    Some((x, uses, assumptions))
}

/// The bucket size whose exposed all-reduce is least ([`models::bucket_step_ms`]).
fn buckets(
    f: &Figures,
    (x, uses, assumptions): &(Exchange, Vec<String>, Vec<String>),
    notes: &mut Vec<String>,
) -> Option<Change> {
    let comm = f.first.parallel.communication.as_ref()?;
    let Some(was) = comm.bucket_mib else {
        notes.push(
            "bucket size: this collective all-reduces every gradient at once; buckets are distributed.collective = \"gloo\"'s"
                .into(),
        );
        return None;
    };
    let whole = x.gradient_bytes / (1u64 << 20) as f64;
    let mut sizes: Vec<f64> = BUCKET_SWEEP_MIB.iter().copied().filter(|m| *m < whole).collect();
    sizes.push(whole.max(was));
    let curve: Vec<[f64; 2]> =
        sizes.iter().map(|&m| [m, models::bucket_step_ms(x, f.step_ms, Some(was), Some(m))]).collect();
    let best = curve.iter().min_by(|a, b| a[1].total_cmp(&b[1]))?;
    if (best[0] - was).abs() < 1e-9 || best[0] >= whole && was >= whole {
        return None;
    }
    let step_ms = best[1];
    let p = Predicted {
        step_ms,
        images_per_s: f.images_per_s * f.step_ms / step_ms,
        data_wait_ms: f.data_wait_ms,
        exposed_ms: (f.exposed_ms + step_ms - f.step_ms).max(0.0),
    };
    let set = keys(&[("distributed.bucket_mib", json!(best[0]))]);
    let was_keys = keys(&[("distributed.bucket_mib", json!(was))]);
    let title = format!("distributed.bucket_mib {was} → {}", (best[0] * 100.0).round() / 100.0);
    let mut c =
        change(f, ChangeKind::BucketSize, title, [set, was_keys], p, uses.clone(), assumptions.clone());
    c.curve = curve;
    Some(c)
}

/// A larger batch per replica, for a cell whose exposed communication
/// limits it ([`models::batch_step_ms`]), as large as the machine's memory
/// takes, with the learning rate scaled by the linear rule.
fn batch(
    f: &Figures,
    others: &[Figures],
    (x, uses, assumptions): &(Exchange, Vec<String>, Vec<String>),
    ctx: &Context,
    notes: &mut Vec<String>,
) -> Option<Change> {
    if f.exposed_pct() < benchkit_schema::verdict::COMMUNICATION_PCT {
        return None;
    }
    let per_replica = f.first.parallel.batch_per_replica;
    let siblings = siblings(f, others);
    let (per_image_ms, fitted) = per_image(f, &siblings);
    let mut uses = uses.clone();
    uses.push(match &fitted {
        Some((a, m, n)) => format!(
            "the step outside the exchange over {n} cells of the run at other batches: {a:.1} ms + {m:.2} ms an image"
        ),
        None => format!(
            "the step outside the exchange {:.1} ms at {per_replica} images a replica",
            f.step_ms - f.exposed_ms
        ),
    });
    let pick = batch_factor(f, x, &siblings, per_image_ms, fitted.is_some());
    let Some((times, step_ms, exposed_ms)) = pick else {
        notes.push("batch: twice the batch would not fit the machine's memory".into());
        return None;
    };
    let now = if ctx.batch_key == "train.batch_size" { f.first.parallel.global_batch } else { per_replica };
    let lr = f.first.parallel.base_lr;
    let mut set = vec![(ctx.batch_key, json!(now * times))];
    let mut was = vec![(ctx.batch_key, json!(now))];
    let mut assumptions = assumptions.clone();
    assumptions.push(if fitted.is_some() {
        "the step outside the exchange on the line through the run's batches; the gradient, and its all-reduce, the same".into()
    } else {
        "the step outside the exchange proportional to the images (no other batch was measured; a larger batch \
         often computes an image faster); the gradient, and its all-reduce, the same"
            .into()
    });
    if lr.is_finite() && lr > 0.0 {
        set.push(("train.lr", json!(lr * times as f64)));
        was.push(("train.lr", json!(lr)));
        assumptions.push(format!(
            "the learning rate scaled {times}× by the linear rule, its warm-up kept (Goyal et al.), for accuracy to follow"
        ));
    }
    if let (Some(peak), Some(gib)) = (f.first.peak_rss_mib, f.memory_gib) {
        uses.push(format!("peak resident memory {peak:.0} MiB of {gib:.1} GiB a process"));
    }
    let p = Predicted {
        step_ms,
        images_per_s: f.images_per_s * times as f64 * f.step_ms / step_ms,
        data_wait_ms: f.data_wait_ms * times as f64,
        exposed_ms,
    };
    let title = format!("batch per replica {per_replica} → {}", per_replica * times);
    Some(change(f, ChangeKind::Batch, title, [keys(&set), keys(&was)], p, uses, assumptions))
}

/// The factor of the batch to advise, its step and exposed communication
/// in ms: of [`BATCH_TIMES`] within reach of what was measured (`fitted`:
/// the siblings measured other batches) and the machine's memory, the
/// smallest whose exposed share falls under the communication verdict's
/// line, else the largest.
fn batch_factor(
    f: &Figures,
    x: &Exchange,
    siblings: &[&Figures],
    per_image_ms: f64,
    fitted: bool,
) -> Option<(usize, f64, f64)> {
    let bucket = f.first.parallel.communication.as_ref().and_then(|c| c.bucket_mib);
    let peak = f.first.peak_rss_mib.filter(|p| p.is_finite() && *p > 0.0);
    let per_replica = f.first.parallel.batch_per_replica;
    let memory = peak_line(siblings);
    // Peak memory on the line through the siblings' peaks, else proportional to the batch.
    let peak_at = |times: usize| {
        let b = (per_replica * times) as f64;
        memory.map_or(peak.map(|p| p * times as f64), |(a, m)| Some(a + m * b))
    };
    let fits = |times: usize| match (peak_at(times), f.memory_gib, &f.first.gpu) {
        (_, _, Some(_)) => true,
        (Some(peak), Some(gib), None) => peak <= gib * 1024.0 * MEMORY_SHARE,
        _ => true,
    };
    // The line is followed to twice the largest batch measured, no further.
    let largest = siblings.iter().map(|o| o.first.parallel.batch_per_replica).max().unwrap_or(per_replica);
    let within = |times: usize| match fitted {
        true => per_replica * times <= 2 * largest,
        false => times <= BATCH_TIMES[1],
    };
    let mut pick = None;
    for times in BATCH_TIMES.into_iter().filter(|&t| within(t) && fits(t)) {
        let step =
            models::batch_step_ms(x, f.step_ms, per_replica as f64, per_image_ms, bucket, times as f64);
        let exposed = f.exposed_ms + x.exposed_ms(bucket, times as f64) - x.exposed_ms(bucket, 1.0);
        pick = Some((times, step, exposed.max(0.0)));
        if 100.0 * exposed / step < benchkit_schema::verdict::COMMUNICATION_PCT {
            break;
        }
    }
    pick
}

/// `f` and the run's cells that differ from it only in [`BATCH_SIBLING_KEYS`].
fn siblings<'a>(f: &Figures, all: &'a [Figures<'a>]) -> Vec<&'a Figures<'a>> {
    let axes = &f.record.axes;
    all.iter()
        .filter(|o| {
            let keys: std::collections::BTreeSet<&String> = axes.keys().chain(o.record.axes.keys()).collect();
            o.first.model == f.first.model
                && keys
                    .into_iter()
                    .all(|k| BATCH_SIBLING_KEYS.contains(&k.as_str()) || axes.get(k) == o.record.axes.get(k))
        })
        .collect()
}

/// Peak resident memory against the batch a replica, `(a, m)` in MiB,
/// over `siblings` of at least two batches: the least-squares line where
/// it rises, else flat at the largest peak measured.
fn peak_line(siblings: &[&Figures]) -> Option<(f64, f64)> {
    let points: Vec<(f64, f64)> = siblings
        .iter()
        .filter_map(|o| {
            Some((o.first.parallel.batch_per_replica as f64, o.first.peak_rss_mib.filter(|p| p.is_finite())?))
        })
        .collect();
    let batches: std::collections::BTreeSet<u64> = points.iter().map(|p| p.0 as u64).collect();
    if batches.len() < 2 {
        return None;
    }
    models::outside_line(&points).or_else(|| Some((points.iter().map(|p| p.1).fold(0.0, f64::max), 0.0)))
}

/// The step's time outside the exchange an image more, in ms: the slope
/// of [`models::outside_line`] through `siblings` (with the line and the
/// cells it went through), else `(s − e)/B` of `f` alone.
fn per_image(f: &Figures, siblings: &[&Figures]) -> (f64, Option<(f64, f64, usize)>) {
    let points: Vec<(f64, f64)> = siblings
        .iter()
        .filter(|o| o.step_ms > 0.0)
        .map(|o| (o.first.parallel.batch_per_replica as f64, o.step_ms - o.exposed_ms))
        .collect();
    match models::outside_line(&points) {
        Some((a, m)) => (m, Some((a, m, points.len()))),
        None => ((f.step_ms - f.exposed_ms) / f.first.parallel.batch_per_replica.max(1) as f64, None),
    }
}

/// Another cell of the run that differs from `f` only in backend or
/// precision, measured faster.
fn measured(f: &Figures, others: &[Figures]) -> Vec<Change> {
    let axes = &f.record.axes;
    let mut out = Vec::new();
    for o in others.iter().filter(|o| o.record.cell != f.record.cell) {
        let keys_of = |m: &serde_json::Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
        if keys_of(axes) != keys_of(&o.record.axes) {
            continue;
        }
        let differ: Vec<&String> = axes.keys().filter(|k| axes.get(*k) != o.record.axes.get(*k)).collect();
        if differ.is_empty() || !differ.iter().all(|k| MEASURED_KEYS.contains(&k.as_str())) {
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
    let step_ms = (f.step_ms - s.wait_ms).max(f.step_ms * 0.01);
    let p = Predicted {
        step_ms,
        images_per_s: f.images_per_s * f.step_ms / step_ms,
        data_wait_ms: f.data_wait_ms,
        exposed_ms: (f.exposed_ms - s.wait_ms).max(0.0),
    };
    let title = format!("free the machine of {} (its load, data or device)", s.who());
    let uses = vec![s.evidence()];
    let assumptions = vec![
        "the straggler then works as fast as the others' median, and no rank waits for it".into(),
        "no config key makes this change: --verify cannot measure it".into(),
    ];
    Some(change(f, ChangeKind::Straggler, title, [BTreeMap::new(), BTreeMap::new()], p, uses, assumptions))
}
