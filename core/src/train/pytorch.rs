//! A PyTorch row (`pytorch`, `pytorch-cuda`, `pytorch-compiled`,
//! `pytorch-cuda-compiled`): the cell exported as a PyTorch script
//! (what `benchkit export` writes) and run by the user's Python as a child of the cell
//! process, which dies with it; the script's per-step and per-epoch records
//! are read back into the same step and epoch records burn's cells
//! produce, so every figure is computed by the same code. The script trains
//! on synthetic data of the cell's shape: a cell of real data says so in
//! its result (`engine.data`) and measures no accuracy.

use super::records::ops::{row_names, OpTally, OUTSIDE};
use super::records::phases::complete;
use super::{EpochRecord, StepRecord, TrainError, TrainOutcome};
use crate::backend::pytorch::{python, HOW, PYTHON_VAR};
use crate::backend::BackendKind;
use crate::model::op_clock::{OpSeconds, OpStep};
use benchkit_schema::{Engine, OpCheck, OpProfile, OpRow};
use serde::Deserialize;
use std::path::Path;
use std::process::{Command, Stdio};

/// What the script prints last: its engine and every record.
#[derive(Deserialize)]
struct Report {
    engine: String,
    device: String,
    threads: usize,
    params: usize,
    warmup_steps: usize,
    /// (epoch, data wait s, compute s, images), warm-up first.
    steps: Vec<(u32, f64, f64, usize)>,
    /// (epoch, mean training loss, seconds training, seconds evaluating).
    epochs: Vec<(u32, Option<f64>, f64, f64)>,
    peak_rss_mib: Option<f64>,
    /// Each epoch's end (its evaluation's), Unix seconds.
    epoch_end_unix_s: Vec<f64>,
    /// The profiled steps: (step index, seconds per phase in benchkit's order).
    #[serde(default)]
    profiled: Vec<(usize, [f64; 7])>,
    /// The profiled steps' seconds summed, op by op (`--ops`).
    #[serde(default)]
    ops: Option<ScriptOps>,
    /// The slowest nodes timed alone: (node, median seconds, runs, page faults a run).
    #[serde(default)]
    checks: Vec<(usize, f64, usize, f64)>,
}

/// The script's op-timed steps summed: a second count per graph node, and
/// per part of the step outside the graph (where the model is compiled,
/// `forward` and `backward` hold the whole passes and no node has any).
#[derive(Deserialize)]
struct ScriptOps {
    by_node: bool,
    #[serde(flatten)]
    seconds: ScriptSums,
    /// Minor page faults, counted as the seconds are.
    faults: ScriptSums,
}

/// Seconds (or page faults) by node and by part of the step.
#[derive(Deserialize)]
struct ScriptSums {
    node_forward: Vec<f64>,
    node_backward: Vec<f64>,
    host_to_device: f64,
    loss_forward: f64,
    loss_backward: f64,
    optimizer: f64,
    untagged: f64,
    forward: f64,
    backward: f64,
}

/// What an op profile of a PyTorch row needs of its cell.
pub struct OpShape<'a> {
    pub graph: &'a crate::model::Graph,
    /// The slowest ops to time alone after training.
    pub checks: usize,
    /// Images a step.
    pub batch: usize,
    /// Bytes of one value in the cell's precision.
    pub value_bytes: usize,
}

/// Why a compiled model's ops have no row of their own.
const COMPILED: &str = "torch.compile fuses the graph's nodes into kernels that span several of them: its forward and backward passes are timed whole and not attributed to ops";

/// Run `script` (the cell's PyTorch script) for a `kind` cell in `dir` with
/// `args`, and read back its outcome and engine. `data` says what the
/// script trained on where that is not the cell's own data.
pub fn train(
    kind: BackendKind,
    script: &str,
    args: &[String],
    dir: &Path,
    data: Option<String>,
    ops: Option<OpShape<'_>>,
) -> Result<(TrainOutcome, Engine), TrainError> {
    if !kind.is_gpu() {
        return run(kind, script, args, dir, data, ops);
    }
    // The GPU sampled through NVML around the script, as a burn cell's is
    // around its step loop.
    let mut engine = None;
    let outcome = super::dispatch::on_gpus(0, 1, || {
        let (outcome, e) = run(kind, script, args, dir, data, ops)?;
        engine = Some(e);
        Ok(outcome)
    })?;
    let engine = engine.ok_or_else(|| TrainError::Backend("the PyTorch script gave no engine".into()))?;
    Ok((outcome, engine))
}

/// Run the script and read back its records.
fn run(
    kind: BackendKind,
    script: &str,
    args: &[String],
    dir: &Path,
    data: Option<String>,
    ops: Option<OpShape<'_>>,
) -> Result<(TrainOutcome, Engine), TrainError> {
    let path = dir.join("pytorch_cell.py");
    // Created here, never through a file or link already there.
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, script.as_bytes()));
    written
        .map_err(|e| TrainError::Setup(format!("cannot write the PyTorch script {}: {e}", path.display())))?;
    let python = python();
    let device = if kind.is_gpu() { "cuda" } else { "cpu" };
    let mut command = Command::new(&python);
    command.arg(&path).args(["--device", device]).args(args).stdin(Stdio::null());
    if kind.is_compiled() {
        command.arg("--compile");
    }
    if let Some(shape) = &ops {
        command.args(["--ops", "--check", &shape.checks.to_string()]);
    }
    crate::child::die_with_parent(&mut command);
    let output = command.output().map_err(|e| {
        TrainError::Backend(format!("cannot run {} ({PYTHON_VAR}): {e}; {HOW}", python.display()))
    })?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last_words = || {
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(3)..].join(" | ")
    };
    if !output.status.success() {
        return Err(TrainError::Backend(format!(
            "the PyTorch script failed ({}): {}",
            output.status,
            last_words()
        )));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).unwrap_or_default();
    let report: Report = serde_json::from_str(line).map_err(|e| {
        TrainError::Backend(format!(
            "the PyTorch script printed no result ({e}); its last words: {}",
            last_words()
        ))
    })?;
    let mut read = outcome(&report, device, data);
    if let (Some(shape), Some(sums)) = (ops, &report.ops) {
        read.0.ops = Some(op_profile(&read.0, &shape, sums, &report.checks)?);
    }
    Ok(read)
}

/// The script's op-timed steps as burn's would be summed, or why they do
/// not fit the cell's graph.
fn op_profile(
    outcome: &TrainOutcome,
    shape: &OpShape<'_>,
    sums: &ScriptOps,
    checks: &[(usize, f64, usize, f64)],
) -> Result<OpProfile, TrainError> {
    let nodes = shape.graph.nodes.len();
    for s in [&sums.seconds, &sums.faults] {
        if s.node_forward.len() != nodes || s.node_backward.len() != nodes {
            return Err(TrainError::Backend(format!(
                "the PyTorch script timed {} and {} nodes, and the cell's graph has {nodes}",
                s.node_forward.len(),
                s.node_backward.len()
            )));
        }
    }
    let read = |s: &ScriptSums| OpSeconds {
        host_to_device: s.host_to_device,
        forward: s.node_forward.clone(),
        backward: s.node_backward.clone(),
        loss_forward: s.loss_forward,
        loss_backward: s.loss_backward,
        untagged: s.untagged + s.forward + s.backward,
        gradients: 0.0,
        optimizer: s.optimizer,
    };
    let seconds = OpStep { seconds: read(&sums.seconds), faults: read(&sums.faults), marks: Vec::new() };
    let profiled: Vec<&StepRecord> =
        outcome.steps.iter().skip(outcome.warmup_steps).filter(|s| s.phases.is_some()).collect();
    let wait: f64 = profiled.iter().map(|s| s.data_wait_s).sum();
    let total: f64 = profiled.iter().map(|s| s.total_s()).sum();
    let plain = super::plain_step_s(outcome.steps.get(outcome.warmup_steps..).unwrap_or_default());
    let tally = OpTally::of(seconds, profiled.len(), wait, total);
    let mut profile = tally
        .profile(shape.graph, shape.batch, shape.value_bytes, plain)
        .ok_or_else(|| TrainError::Backend("the PyTorch script timed the ops of no measured step".into()))?;
    if !sums.by_node {
        profile.rows.retain(|r| OUTSIDE.contains(&r.name.as_str()));
        profile.note = Some(COMPILED.into());
    }
    let names = row_names(shape.graph);
    for &(node, seconds, runs, alone_page_faults) in checks.iter().take(shape.checks) {
        let name = names.get(node).cloned().ok_or_else(|| {
            TrainError::Backend(format!("the PyTorch script timed node {node} alone; the graph has {nodes}"))
        })?;
        let row = profile.rows.iter().find(|r| r.name == name);
        profile.checks.push(OpCheck {
            name,
            profiled_ms: row.map_or(f64::NAN, OpRow::ms),
            alone_ms: seconds * 1e3,
            runs,
            profiled_page_faults: row.map_or(0.0, |r| r.page_faults),
            alone_page_faults,
        });
    }
    Ok(profile)
}

/// The script's report as burn's step loop would have recorded it.
fn outcome(report: &Report, device: &str, data: Option<String>) -> (TrainOutcome, Engine) {
    let mut steps: Vec<StepRecord> = report
        .steps
        .iter()
        .map(|&(epoch, data_wait_s, compute_s, images)| StepRecord {
            epoch,
            data_wait_s,
            compute_s,
            exposed_communication_s: 0.0,
            communication_s: 0.0,
            images,
            phases: None,
        })
        .collect();
    for (i, phases) in &report.profiled {
        if let Some(s) = steps.get_mut(*i) {
            s.phases = Some(complete(*phases, s.data_wait_s, s.compute_s));
        }
    }
    let warmup = report.warmup_steps.min(steps.len());
    // Each epoch ends when the script says it did (now, where it did not).
    let now = crate::measure::env::unix_ms();
    let ends = &report.epoch_end_unix_s;
    let epochs = report
        .epochs
        .iter()
        .enumerate()
        .map(|(i, &(epoch, loss, train_s, eval_s))| {
            let of_epoch: Vec<(usize, &StepRecord)> =
                steps.iter().enumerate().filter(|(_, s)| s.epoch == epoch).collect();
            let measured: Vec<&StepRecord> =
                of_epoch.iter().filter(|(i, _)| *i >= warmup).map(|(_, s)| *s).collect();
            let seconds: f64 = measured.iter().map(|s| s.total_s()).sum();
            let images: usize = measured.iter().map(|s| s.images).sum();
            EpochRecord {
                epoch,
                steps: of_epoch.len(),
                images: of_epoch.iter().map(|(_, s)| s.images).sum(),
                eval_images: 0,
                train_loss: loss.unwrap_or(f64::NAN),
                train_accuracy: f64::NAN,
                test_loss: f64::NAN,
                test_accuracy: f64::NAN,
                images_per_s: if seconds > 0.0 { images as f64 / seconds } else { f64::NAN },
                train_s,
                eval_s,
                lr_end: f64::NAN,
                end_unix_ms: match ends.get(i) {
                    Some(&end) if end.is_finite() && end > 0.0 => (1e3 * end).round() as u64,
                    _ => now,
                },
                metrics: Default::default(),
                pr_curve: Vec::new(),
            }
        })
        .collect();
    let mut outcome = TrainOutcome::of_steps(steps, warmup, epochs);
    outcome.num_params = report.params;
    outcome.peak_rss_mib = report.peak_rss_mib;
    // Host threads matter where the CPU computes; a GPU row has none to show.
    outcome.threads = (device == "cpu").then_some(report.threads);
    let device = match device {
        "cpu" => format!("{} ({} threads)", report.device, report.threads),
        _ => report.device.clone(),
    };
    (outcome, Engine { name: report.engine.clone(), device, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The script's records become burn's: warm-up cut, each epoch's
    /// images/s over its measured steps, no accuracy.
    #[test]
    fn a_scripts_records_read_as_burns() {
        let line = r#"{"engine": "pytorch 2.9.0 eager", "device": "cpu", "threads": 2, "params": 10,
            "warmup_steps": 1, "steps": [[1, 0.5, 1.5, 8], [1, 0.0, 0.5, 8], [2, 0.1, 0.3, 8]],
            "epochs": [[1, 2.5, 2.6, 0.7], [2, null, 0.4, 0.5]], "epoch_end_unix_s": [1000.5, 1002.0],
            "peak_rss_mib": 300.0, "final_loss": null}"#;
        let report: Report = serde_json::from_str(line).unwrap();
        let (outcome, engine) = outcome(&report, "cpu", Some("synthetic images".into()));
        assert_eq!(outcome.steps.len(), 3);
        assert_eq!(outcome.warmup_steps, 1);
        assert_eq!(outcome.num_params, 10);
        assert_eq!(outcome.epochs[0].images_per_s, 16.0, "8 images in 0.5 s; the warm-up step left out");
        assert!((outcome.epochs[1].images_per_s - 20.0).abs() < 1e-9, "8 images in 0.4 s");
        assert!(outcome.epochs[1].train_loss.is_nan() && outcome.epochs[0].test_accuracy.is_nan());
        assert_eq!((outcome.epochs[0].eval_s, outcome.epochs[1].eval_s), (0.7, 0.5), "evaluation timed");
        assert_eq!(
            (outcome.epochs[0].end_unix_ms, outcome.epochs[1].end_unix_ms),
            (1_000_500, 1_002_000),
            "each epoch ends when the script says"
        );
        assert_eq!(outcome.threads, Some(2));
        assert_eq!(engine.device, "cpu (2 threads)");
        assert_eq!(engine.data.as_deref(), Some("synthetic images"));
    }
}
