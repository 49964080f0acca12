//! The changes to a multi-replica cell's exchange of gradients: another
//! bucket size, and a larger batch per replica, each predicted by the
//! exchange model of [`super::models`] calibrated to the cell's measured
//! all-reduce.

use super::change::{change, keys, Context, Predicted};
use super::figures::Figures;
use super::models::{self, Exchange};
use crate::predict::{links, Link};
use benchkit_schema::{Change, ChangeKind};
use serde_json::json;
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
/// Of the machine's memory, the share a larger batch's peak may take.
const MEMORY_SHARE: f64 = 0.9;

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
pub fn exchange(
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
    if total.is_finite() && total > 0.0 && model > 0.0 && model.is_finite() {
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
pub fn buckets(
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
pub fn batch(
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
    if f.first.gpu.is_some() {
        notes.push("batch: not checked against the device's memory, which the results do not hold".into());
    }
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
