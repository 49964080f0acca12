//! `benchkit predict`: the scaling a cell measured on one replica would see
//! on N replicas over a given network ([`crate::predict`]), checked against
//! the run's multi-replica cells over that network where it has some
//! ([`super::predict_check`]), printed and written beside the run as
//! `predict.json` and `predict.html`.

use super::{predict_check, predict_html, CliError};
use crate::config::CollectiveKind;
use crate::predict::{self, links, Algorithm, Measured, Overlap, Point, Scaling, Schedule, Topology};
use crate::runner::CellRecord;
use benchkit_schema::Phase;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct PredictArgs {
    /// A results directory holding a single-replica cell.
    pub results: PathBuf,
    /// The cell to predict from: its id, or its index in the matrix from 0 [default: the only single-replica cell].
    #[arg(long)]
    pub cell: Option<String>,
    /// The link between machines: a preset (pcie4, pcie5, nvlink4, ib100, ib200, ib400, 25gbe, 100gbe), a rate (10gbit, 100mbit) or a `benchkit collective` result.
    #[arg(long, default_value = "10gbit")]
    pub link: String,
    /// Replicas a machine.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub gpus_per_machine: u64,
    /// Machine counts to predict for, e.g. `1,2,4,64` (replicas = machines × --gpus-per-machine)
    /// [default: 1 to 1,024 replicas in powers of two].
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub machines: Vec<u64>,
    /// The link inside a machine [default: --link].
    #[arg(long)]
    pub intra: Option<String>,
    /// Largest gradient bucket, in MiB (each is its own all-reduce).
    #[arg(long, default_value_t = 25.0)]
    pub bucket_mib: f64,
    /// Buckets go out while the backward pass runs (as DDP, Horovod and
    /// benchkit's Gloo send them) [default: after it].
    #[arg(long)]
    pub overlap: bool,
}

/// Replicas predicted for: powers of two up to 1,024.
const REPLICAS: [usize; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

pub fn predict(args: &PredictArgs) -> Result<(), CliError> {
    let fail = |m: String| CliError::Predict(m);
    if !(args.bucket_mib > 0.0 && args.bucket_mib.is_finite()) {
        return Err(fail(format!("--bucket-mib {}: expected a positive size", args.bucket_mib)));
    }
    let (cell, cells) = single_replica_cell(&args.results, args.cell.as_deref()).map_err(fail)?;
    let id = cell.cell.clone();
    let (measured, backward_profiled) =
        measured(&cell, args.bucket_mib).map_err(|e| fail(format!("cell {id}: {e}")))?;
    let inter = links::resolve(&args.link).map_err(|e| fail(format!("--link: {e}")))?;
    let intra = match &args.intra {
        Some(spec) => links::resolve(spec).map_err(|e| fail(format!("--intra: {e}")))?,
        None => inter.clone(),
    };
    let topology = Topology { gpus_per_machine: args.gpus_per_machine as usize, intra, inter };
    let overlap = if args.overlap { Overlap::Backward } else { Overlap::None };
    let replicas: Vec<usize> = if args.machines.is_empty() {
        REPLICAS.to_vec()
    } else {
        let mut w: Vec<usize> = args.machines.iter().map(|&n| (n * args.gpus_per_machine) as usize).collect();
        w.sort_unstable();
        w.dedup();
        w
    };
    let mut table = Vec::new();
    for scaling in [Scaling::Weak, Scaling::Strong] {
        for algorithm in [Algorithm::Ring, Algorithm::Tree] {
            let schedule = Schedule { algorithm, overlap };
            // Strong scaling stops where a replica would get less than one image.
            for &n in replicas.iter().filter(|&&n| scaling == Scaling::Weak || n <= measured.batch) {
                table.push((scaling, algorithm, predict::point(&measured, &topology, schedule, scaling, n)));
            }
        }
    }
    let mut assumptions = predict::assumptions(&topology, Scaling::Strong, overlap);
    if overlap == Overlap::Backward {
        let share = 100.0 * measured.backward_s / measured.compute_s;
        assumptions.push(if backward_profiled {
            format!("the backward pass {share:.0} % of compute, as profiled")
        } else {
            format!("the backward pass {share:.0} % of compute: assumed, the cell was not profiled")
        });
    }
    print(&id, &measured, &table, &assumptions);
    let cores =
        crate::runner::read_run(&args.results).ok().and_then(|r| r.environment).map(|e| e.logical_cores);
    let checks = predict_check::checks(&cell, &measured, &cells, &topology, cores);
    predict_check::print(&checks);
    let out = args.results.join("predict.json");
    let points: Vec<serde_json::Value> = table
        .iter()
        .map(|(s, a, p)| {
            serde_json::json!({
                "scaling": if *s == Scaling::Weak { "weak" } else { "strong" },
                "algorithm": a.name(),
                "replicas": p.replicas,
                "step_s": p.step_s,
                "communication_s": p.communication_s,
                "exposed_communication_s": p.exposed_communication_s,
                "images_per_s": p.images_per_s,
                "efficiency": p.efficiency,
            })
        })
        .collect();
    let json = serde_json::json!({
        "cell": id,
        "measured": {
            "compute_s": measured.compute_s,
            "backward_s": measured.backward_s,
            "backward_profiled": backward_profiled,
            "batch": measured.batch,
            "bucket_bytes": measured.buckets,
        },
        "overlap": overlap.name(),
        "gpus_per_machine": topology.gpus_per_machine,
        "intra": link_json(&topology.intra),
        "inter": link_json(&topology.inter),
        "assumptions": assumptions,
        "points": points,
        "checks": checks,
    });
    let text = serde_json::to_string_pretty(&json).map_err(|e| fail(e.to_string()))?;
    let html = predict_html::page(&id, &table, &checks, &assumptions);
    for (out, text) in [(out, text), (args.results.join("predict.html"), html)] {
        crate::atomic::write_atomic(&out, text.as_bytes())
            .map_err(|e| fail(format!("cannot write {}: {e}", out.display())))?;
        println!("wrote {}", out.display());
    }
    Ok(())
}

fn link_json(link: &predict::Link) -> serde_json::Value {
    serde_json::json!({ "name": link.name, "alpha_s": link.alpha_s, "bytes_per_s": link.bytes_per_s, "source": link.source })
}

/// The cell `wanted` (or the only single-replica one) of the measured run
/// in `results`, and all its finished cells.
fn single_replica_cell(
    results: &Path,
    wanted: Option<&str>,
) -> Result<(CellRecord, Vec<CellRecord>), String> {
    let (mock, cells) = crate::runner::load_run_cells(results).map_err(|e| e.to_string())?;
    if mock {
        return Err(format!("{} is a --mock run, whose figures are invented", results.display()));
    }
    let finished: Vec<CellRecord> = cells.into_iter().filter(|c| !c.repeats.is_empty()).collect();
    let single = |c: &CellRecord| c.repeats.iter().all(|r| r.parallel.replicas == 1);
    let ids = || finished.iter().map(|c| c.cell.as_str()).collect::<Vec<_>>().join(", ");
    let cell = match wanted {
        Some(want) => {
            finished.iter().find(|c| c.cell == want || c.index.to_string() == want).ok_or_else(|| {
                format!("no finished cell `{want}` in {}; its cells: {}", results.display(), ids())
            })?
        }
        None => match finished.iter().filter(|c| single(c)).collect::<Vec<_>>().as_slice() {
            [cell] => *cell,
            [] => return Err(format!("{} holds no finished single-replica cell", results.display())),
            _ => {
                return Err(format!(
                    "{} holds several single-replica cells: pick one with --cell ({})",
                    results.display(),
                    ids()
                ))
            }
        },
    };
    if !single(cell) {
        return Err(format!(
            "cell `{}` trained on several replicas: predict from a single-replica cell",
            cell.cell
        ));
    }
    Ok((cell.clone(), finished.clone()))
}

/// Of a step's compute, the share the backward pass takes where nothing
/// profiled it: twice the forward pass's work, with the optimizer's small.
const BACKWARD_SHARE: f64 = 2.0 / 3.0;

/// What the model needs of a cell: its compute a step (the median over
/// repeats of each one's median), the backward pass's share of it (as
/// profiled, else [`BACKWARD_SHARE`]; `true` when profiled), its batch,
/// and its gradient (a value a parameter, at the bytes the collective that
/// would carry it puts on the wire: NCCL's, in the training format, for a
/// GPU cell; Gloo's f32 for a CPU cell) cut into buckets of at most
/// `bucket_mib`.
fn measured(cell: &CellRecord, bucket_mib: f64) -> Result<(Measured, bool), String> {
    let p50s: Vec<f64> =
        cell.repeats.iter().map(|r| r.compute_ms.p50).filter(|c| *c > 0.0 && c.is_finite()).collect();
    let run = &cell.repeats[0];
    if p50s.is_empty() || run.batch_size == 0 || run.params == 0 {
        return Err("its result has no measured compute time, batch or parameters".into());
    }
    let precision = crate::backend::Precision::from_name(&run.precision).unwrap_or_default();
    let on_gpu = run.gpu.is_some() || run.backend.contains("cuda");
    let collective = if on_gpu { CollectiveKind::Nccl } else { CollectiveKind::Gloo };
    let total = run.params as f64 * collective.wire_bytes_per_value(precision) as f64;
    let cap = bucket_mib * (1 << 20) as f64;
    let buckets = (0..(total / cap).ceil() as usize).map(|i| (total - i as f64 * cap).min(cap)).collect();
    let compute_s = benchkit_schema::stats::median(&p50s) / 1e3;
    // The profiled phases outside data wait are the step's compute.
    let profiled = run.phases.as_ref().and_then(|p| {
        let compute: f64 = p.ms.iter().sum::<f64>() - p.ms[Phase::DataWait.index()];
        let backward = p.ms[Phase::Backward.index()];
        (compute > 0.0 && backward.is_finite()).then_some(backward / compute)
    });
    let share = profiled.unwrap_or(BACKWARD_SHARE);
    let measured = Measured { compute_s, backward_s: compute_s * share, batch: run.batch_size, buckets };
    Ok((measured, profiled.is_some()))
}

fn print(id: &str, measured: &Measured, table: &[(Scaling, Algorithm, Point)], assumptions: &[String]) {
    let bytes: f64 = measured.buckets.iter().sum();
    println!(
        "{id}: {:.1} ms of compute a step at batch {}, {:.1} MB of gradients in {} bucket(s)",
        measured.compute_s * 1e3,
        measured.batch,
        bytes / 1e6,
        measured.buckets.len()
    );
    for scaling in [Scaling::Weak, Scaling::Strong] {
        let what = match scaling {
            Scaling::Weak => format!("weak scaling (batch {} a replica)", measured.batch),
            Scaling::Strong => format!("strong scaling (global batch {})", measured.batch),
        };
        println!("\n{what}");
        println!(
            "{:>7}  {:>10}  {:>10}  {:>7}  {:>10}  {:>10}  {:>7}",
            "replicas", "ring step", "img/s", "eff", "tree step", "img/s", "eff"
        );
        let of = |a: Algorithm| {
            table.iter().filter(move |(s, al, _)| *s == scaling && *al == a).map(|(_, _, p)| p)
        };
        for (r, t) in of(Algorithm::Ring).zip(of(Algorithm::Tree)) {
            println!(
                "{:>7}  {:>8.1} ms  {:>10.1}  {:>6.1}%  {:>8.1} ms  {:>10.1}  {:>6.1}%",
                r.replicas,
                r.step_s * 1e3,
                r.images_per_s,
                r.efficiency * 100.0,
                t.step_s * 1e3,
                t.images_per_s,
                t.efficiency * 100.0
            );
        }
    }
    println!("\nassumptions:");
    for a in assumptions {
        println!("  - {a}");
    }
}
