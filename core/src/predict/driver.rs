//! A prediction from a results directory: the single-replica cell chosen,
//! what the model needs of it ([`measured`]), the predicted table for weak
//! and strong scaling, ring and tree, the checks against the run's
//! multi-replica cells ([`super::check`]), and what `benchkit predict`
//! prints and writes beside the run (`predict.json`, `predict.html`).

use super::check::{self, Check};
use super::{links, Algorithm, Measured, Overlap, Point, Scaling, Schedule, Topology};
use crate::backend::CollectiveKind;
use benchkit_schema::{CellRecord, Phase};
use std::path::{Path, PathBuf};

/// Replicas predicted for when no machine counts are given: powers of two up to 1,024.
const REPLICAS: [usize; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/// What to predict, as `benchkit predict` is asked.
#[derive(Clone, Debug)]
pub struct Request {
    /// A results directory holding a single-replica cell.
    pub results: PathBuf,
    /// The cell to predict from: its id or index [default: the only single-replica cell].
    pub cell: Option<String>,
    /// The link between machines, and inside one [default: `link`].
    pub link: String,
    pub intra: Option<String>,
    /// Replicas a machine.
    pub gpus_per_machine: usize,
    /// Machine counts to predict for [default: 1 to 1,024 replicas in powers of two].
    pub machines: Vec<u64>,
    /// Largest gradient bucket, in MiB.
    pub bucket_mib: f64,
    /// Buckets go out while the backward pass runs.
    pub overlap: bool,
}

/// A prediction and the checks against what was measured.
#[derive(Clone, Debug)]
pub struct Prediction {
    pub cell: String,
    pub measured: Measured,
    /// The backward pass's share of compute was profiled, not assumed.
    pub backward_profiled: bool,
    pub topology: Topology,
    pub overlap: Overlap,
    pub table: Vec<(Scaling, Algorithm, Point)>,
    pub assumptions: Vec<String>,
    pub checks: Vec<Check>,
}

/// The prediction `request` asks for, or why there is none.
pub fn from_results(request: &Request) -> Result<Prediction, String> {
    if !(request.bucket_mib > 0.0 && request.bucket_mib.is_finite()) {
        return Err(format!("--bucket-mib {}: expected a positive size", request.bucket_mib));
    }
    let (cell, cells) = single_replica_cell(&request.results, request.cell.as_deref())?;
    let id = cell.cell.clone();
    let (measured, backward_profiled) =
        measured(&cell, request.bucket_mib).map_err(|e| format!("cell {id}: {e}"))?;
    let inter = links::resolve(&request.link).map_err(|e| format!("--link: {e}"))?;
    let intra = match &request.intra {
        Some(spec) => links::resolve(spec).map_err(|e| format!("--intra: {e}"))?,
        None => inter.clone(),
    };
    let topology = Topology { gpus_per_machine: request.gpus_per_machine, intra, inter };
    let overlap = if request.overlap { Overlap::Backward } else { Overlap::None };
    let replicas: Vec<usize> = if request.machines.is_empty() {
        REPLICAS.to_vec()
    } else {
        let mut r: Vec<usize> =
            request.machines.iter().map(|&n| n as usize * request.gpus_per_machine).collect();
        r.sort_unstable();
        r.dedup();
        r
    };
    let mut table = Vec::new();
    for scaling in [Scaling::Weak, Scaling::Strong] {
        for algorithm in [Algorithm::Ring, Algorithm::Tree] {
            let schedule = Schedule { algorithm, overlap };
            // Strong scaling stops where a replica would get less than one image.
            for &n in replicas.iter().filter(|&&n| scaling == Scaling::Weak || n <= measured.batch) {
                table.push((scaling, algorithm, super::point(&measured, &topology, schedule, scaling, n)));
            }
        }
    }
    let mut assumptions = super::assumptions(&topology, Scaling::Strong, overlap);
    if overlap == Overlap::Backward {
        let share = 100.0 * measured.backward_s / measured.compute_s;
        assumptions.push(if backward_profiled {
            format!("the backward pass {share:.0} % of compute, as profiled")
        } else {
            format!("the backward pass {share:.0} % of compute: assumed, the cell was not profiled")
        });
    }
    let cores =
        crate::runner::read_run(&request.results).ok().and_then(|r| r.environment).map(|e| e.logical_cores);
    let checks = check::checks(&cell, &measured, &cells, &topology, cores);
    Ok(Prediction { cell: id, measured, backward_profiled, topology, overlap, table, assumptions, checks })
}

impl Prediction {
    /// The predicted table, its assumptions and the checks, as the terminal shows them.
    pub fn text(&self) -> String {
        table_text(&self.cell, &self.measured, &self.table, &self.assumptions) + &check::table(&self.checks)
    }

    /// `predict.json`: what was measured, the link, every point and check.
    pub fn json(&self) -> serde_json::Value {
        let points: Vec<serde_json::Value> = self
            .table
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
        serde_json::json!({
            "cell": self.cell,
            "measured": {
                "compute_s": self.measured.compute_s,
                "backward_s": self.measured.backward_s,
                "backward_profiled": self.backward_profiled,
                "batch": self.measured.batch,
                "bucket_bytes": self.measured.buckets,
            },
            "overlap": self.overlap.name(),
            "gpus_per_machine": self.topology.gpus_per_machine,
            "intra": link_json(&self.topology.intra),
            "inter": link_json(&self.topology.inter),
            "assumptions": self.assumptions,
            "points": points,
            "checks": self.checks,
        })
    }

    /// `predict.html`.
    pub fn page(&self) -> String {
        super::html::page(&self.cell, &self.table, &self.checks, &self.assumptions)
    }
}

fn link_json(link: &super::Link) -> serde_json::Value {
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

/// What the model needs of a cell: its compute a step (the median over
/// repeats of each one's median), the backward pass's share of it (as
/// profiled, else [`super::BACKWARD_SHARE`]; `true` when profiled), its batch,
/// and its gradient (a value a parameter, at the bytes the collective that
/// would carry it puts on the wire: NCCL's, in the training format, for a
/// GPU cell; Gloo's f32 for a CPU cell) cut into buckets of at most
/// `bucket_mib`.
fn measured(cell: &CellRecord, bucket_mib: f64) -> Result<(Measured, bool), String> {
    let p50s: Vec<f64> =
        cell.repeats.iter().map(|r| r.compute_ms.p50).filter(|c| *c > 0.0 && c.is_finite()).collect();
    let repeat = &cell.repeats[0];
    if p50s.is_empty() || repeat.batch_size == 0 || repeat.params == 0 {
        return Err("its result has no measured compute time, batch or parameters".into());
    }
    let precision = crate::backend::Precision::from_name(&repeat.precision).unwrap_or_default();
    let on_gpu = repeat.gpu.is_some() || repeat.backend.contains("cuda");
    let collective = if on_gpu { CollectiveKind::Nccl } else { CollectiveKind::Gloo };
    let total = repeat.params as f64 * collective.wire_bytes_per_value(precision) as f64;
    let cap = bucket_mib * (1 << 20) as f64;
    let buckets = (0..(total / cap).ceil() as usize).map(|i| (total - i as f64 * cap).min(cap)).collect();
    let compute_s = benchkit_schema::stats::median(&p50s) / 1e3;
    // The profiled phases outside data wait are the step's compute.
    let profiled = repeat.phases.as_ref().and_then(|p| {
        let compute: f64 = p.ms.iter().sum::<f64>() - p.ms[Phase::DataWait.index()];
        let backward = p.ms[Phase::Backward.index()];
        (compute > 0.0 && backward.is_finite()).then_some(backward / compute)
    });
    let share = profiled.unwrap_or(super::BACKWARD_SHARE);
    let measured = Measured { compute_s, backward_s: compute_s * share, batch: repeat.batch_size, buckets };
    Ok((measured, profiled.is_some()))
}

fn table_text(
    id: &str,
    measured: &Measured,
    table: &[(Scaling, Algorithm, Point)],
    assumptions: &[String],
) -> String {
    let mut out = String::new();
    let bytes: f64 = measured.buckets.iter().sum();
    out += &format!(
        "{id}: {:.1} ms of compute a step at batch {}, {:.1} MB of gradients in {} bucket(s)\n",
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
        out += &format!("\n{what}\n");
        out += &format!(
            "{:>8}  {:>10}  {:>10}  {:>7}  {:>10}  {:>10}  {:>7}\n",
            "replicas", "ring step", "img/s", "eff", "tree step", "img/s", "eff"
        );
        let of = |a: Algorithm| {
            table.iter().filter(move |(s, al, _)| *s == scaling && *al == a).map(|(_, _, p)| p)
        };
        for (r, t) in of(Algorithm::Ring).zip(of(Algorithm::Tree)) {
            out += &format!(
                "{:>8}  {:>8.1} ms  {:>10.1}  {:>6.1}%  {:>8.1} ms  {:>10.1}  {:>6.1}%\n",
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
    out += "\nassumptions:\n";
    for a in assumptions {
        out += &format!("  - {a}\n");
    }
    out
}
