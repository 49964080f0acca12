//! The cell's own process: one repeat of one cell, prepared
//! ([`prepare`]), trained and summarised. Progress goes to the parent as
//! the messages of [`super::message`].

pub mod inspect;
pub mod prepare;

use super::message::{CellMessage, CellOrder, MARK};
use crate::analysis::{cell_result, CellMeta};
use crate::backend;
use crate::config::{Cell, Mode, Plan};
use crate::data::DataError;
use crate::data::ProcessShare;
use crate::data::{Decode, Loader, LoaderConfig, Pipeline, Shuffle, SourceKind, Split};
use crate::export::{train_in_pytorch, CellFacts, ExportError};
use crate::measure::energy::{gpu_joules, Rapl, POWERCAP};
use crate::measure::env::unix_ms;
use crate::plugin::text::{clean_line, MESSAGE_BYTES};
use crate::plugin::PluginError;
use crate::report::{CellResult, LoaderReport};
use crate::runner::RunnerError;
use crate::train::{loader_only, CellJob, Hits, Task, TrainError, TrainOutcome, World};
use benchkit_schema::{Failure, FailureKind};
use prepare::{loader_config, prepare, Prepared};
use serde::Serialize;
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Instant;

/// Why `error` failed the cell, naming the plugin and call when one
/// failed, and whether it broke off because another process of the cell
/// went away (a peer lost mid-step may be back next time; anything else
/// the cell itself raised, config, data, plugin or memory, would recur).
pub fn failure_of(error: &RunnerError) -> CellMessage {
    let plugin = match error {
        RunnerError::Plugin(p) => Some(p),
        RunnerError::Data(DataError::Transform(e))
        | RunnerError::Train(TrainError::Data(DataError::Transform(e))) => e.downcast_ref::<PluginError>(),
        _ => None,
    };
    let (plugin, call) = match plugin.map(PluginError::origin) {
        Some((plugin, call)) => (Some(plugin.to_string()), call.map(str::to_string)),
        None => (None, None),
    };
    let failure = Failure {
        reason: clean_line(&error.to_string(), 4 * MESSAGE_BYTES),
        plugin,
        call,
        ..Failure::default()
    };
    if matches!(error, RunnerError::Train(TrainError::LostPeer(_))) {
        CellMessage::LostPeer(Failure { kind: FailureKind::Transient, ..failure })
    } else {
        CellMessage::Failed(failure)
    }
}

/// Train one repeat of `cell`, reporting progress to `tell`.
///
/// Formula: the result's model is the model plugin's own name (its info.name).
pub fn run_cell(
    cell: &Cell,
    repeat: u32,
    world: Option<World>,
    tell: &mut dyn FnMut(CellMessage),
) -> Result<CellResult, RunnerError> {
    let started = Instant::now();
    let started_unix_ms = unix_ms();
    let world = world.filter(|w| w.processes > 1);
    // Each process loads its share of every global batch (`local_batch`)
    // from its share of the data.
    let plan = &cell.plan;
    if plan.mode == Mode::Train && !plan.backend.is_pytorch() {
        let parallel = &plan.train.parallel;
        crate::train::size_global_pool(parallel.device_count(), parallel.threads_per_device);
    }
    tell(CellMessage::Phase(format!(
        "loading the data and plugins and checking model {}'s graph",
        plan.model.source
    )));
    let Prepared { model, dataset, decode, graph, memory, transforms, .. } = prepare(plan)?;
    tell(CellMessage::Phase(format!(
        "building the network from model {}'s graph ({} MiB estimated for training) and running its first step",
        model.origin,
        memory.total_bytes().div_ceil(1 << 20)
    )));
    let train_set = match &world {
        Some(w) => std::sync::Arc::new(ProcessShare::new(dataset.train.clone(), w.rank, w.processes)),
        None => dataset.train.clone(),
    };
    let rank = world.as_ref().map_or(0, |w| w.rank);
    let delay = plan.train.faults.input_delay_of(rank);
    let config = LoaderConfig { read_delay_us: delay.as_micros() as u64, ..loader_config(plan) };
    let mut loader = Loader::new(transforms, decode, config);
    let tell = std::cell::RefCell::new(tell);
    let mut last_step = Instant::now();
    let mut on_step = |done: usize, total: usize| {
        // Enough for a progress bar without flooding the pipe on tiny steps.
        if done == total || last_step.elapsed().as_millis() >= 100 {
            last_step = Instant::now();
            (tell.borrow_mut())(CellMessage::Step { done, total });
        }
    };
    let hits = Hits { iou: plan.train.hit_iou, score: plan.train.hit_score };
    let task = Task::of(&graph, dataset.multi_label, hits);
    let job = CellJob {
        graph: &graph,
        task,
        labels: &dataset.classes,
        plan: &plan.train,
        seed: plan.seed,
        loader: &mut loader,
        train_set,
        test_set: dataset.test.clone(),
        on_step: &mut on_step,
        on_epoch: &mut |record| (tell.borrow_mut())(CellMessage::Epoch(record.clone())),
        world: world.clone(),
        kernels: None,
    };
    let rapl = (!plan.backend.is_gpu()).then(|| Rapl::start(Path::new(POWERCAP)));
    let (outcome, engine) = match plan.mode {
        Mode::Train if plan.backend.is_pytorch() => {
            let (train_len, test_len) = (job.train_set.len(), job.test_set.len());
            drop(job);
            (tell.borrow_mut())(CellMessage::Phase(format!(
                "training in PyTorch ({})",
                backend::pytorch::python().display()
            )));
            let model_name = format!("{} {}", model.info.name, model.info.version);
            let facts =
                CellFacts::of(cell, &graph, task, model_name, (train_len, test_len)).map_err(from_export)?;
            let (outcome, engine) = train_in_pytorch(&facts).map_err(from_export)?;
            (outcome, Some(engine))
        }
        Mode::Train => (crate::train::train_cell(plan.backend, job)?, None),
        Mode::LoaderOnly => (loader_only(job)?, None),
    };
    let energy = energy(rapl, &outcome);
    let mut loader = loader_report(plan, &loader, decode, &[&dataset.train, &dataset.test]);
    if engine.is_some() {
        // The script made its own batches: benchkit's loader read nothing.
        loader.source = "synthetic".into();
        loader.cut_files.clear();
    }
    if let Some((vocabulary, max_tokens)) = &dataset.vocabulary {
        loader.vocabulary = Some(vocabulary.len());
        loader.max_tokens = Some(*max_tokens);
    }
    let meta = CellMeta {
        seed: plan.seed,
        cell: cell.id.clone(),
        repeat,
        axes: cell.axes.clone(),
        model: model.info.name.clone(),
        backend: plan.backend.to_string(),
        forward_macs_per_image: graph.forward_macs(),
        usd_per_hour: plan.usd_per_hour,
        started_unix_ms,
        mode: plan.mode,
        loader,
        accuracy_metric: task.accuracy_metric().into(),
        train: cell.plan.train.clone(),
        energy: Some(energy),
        memory_estimate_bytes: (plan.mode == Mode::Train).then(|| memory.total_bytes()),
    };
    let mut result = cell_result(meta, &outcome, started.elapsed().as_secs_f64());
    result.engine = engine;
    if let (Some(window), false) = (plan.train.timeline, outcome.timeline.is_empty()) {
        let timeline =
            benchkit_schema::CellTimeline { cell: cell.id.clone(), repeat, window, ranks: outcome.timeline };
        (tell.borrow_mut())(CellMessage::Timeline(Box::new(timeline)));
    }
    (tell.borrow_mut())(CellMessage::Done(Box::new(result.clone())));
    Ok(result)
}

/// A PyTorch row's failure as the cell's: training's own errors keep their
/// kind (a lost peer, out of memory), anything else is the cell's setup.
fn from_export(error: ExportError) -> RunnerError {
    match error {
        ExportError::Train(e) => RunnerError::Train(e),
        other => RunnerError::Setup(other.to_string()),
    }
}

/// The cell's energy: its GPUs' sampled power where there is some, else
/// the CPU packages' counters, else why neither could be read.
fn energy(rapl: Option<Result<Rapl, String>>, outcome: &TrainOutcome) -> Result<(String, f64), String> {
    if let Some(gpu) = &outcome.gpu {
        // Training and evaluation: from the first epoch's start (warm-up
        // included) to the last epoch's end, not the setup before them.
        let first = outcome.epochs.first().map(|e| e.end_unix_ms as f64 - 1e3 * (e.train_s + e.eval_s));
        let last = outcome.epochs.last().map(|e| e.end_unix_ms as f64);
        let span = first.zip(last).unwrap_or((f64::NEG_INFINITY, f64::INFINITY));
        return gpu_joules(gpu, span).map(|j| ("nvml".to_string(), j)).ok_or_else(|| {
            let why = gpu.unavailable.as_deref().unwrap_or("fewer than two NVML power samples");
            format!("no GPU power figure: {why}")
        });
    }
    match rapl {
        Some(meter) => meter.and_then(|m| m.joules()).map(|j| ("rapl".to_string(), j)),
        None => Err("no NVML report for this GPU cell".into()),
    }
}

fn name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".into(),
    }
}

/// The loader's resolved knobs and stage times, and the files of `splits`
/// read only up to a fault.
fn loader_report(
    plan: &Plan,
    loader: &Loader,
    decode: Decode,
    splits: &[&std::sync::Arc<dyn Split>],
) -> LoaderReport {
    let d = &plan.data;
    let times = loader.times();
    let per_batch = |s: f64| if times.batches > 0 { 1e3 * s / times.batches as f64 } else { f64::NAN };
    let threads = d.pipeline == Pipeline::Optimized && d.source != SourceKind::Synthetic;
    LoaderReport {
        source: d.source.to_string(),
        pipeline: name(&d.pipeline),
        workers: if threads { d.workers } else { 0 },
        prefetch: if threads { d.prefetch } else { 0 },
        shuffle: match d.shuffle {
            Shuffle::Buffer(n) => format!("buffer {n}"),
            other => name(&other),
        },
        interleave: d.interleave,
        on_corrupt: name(&d.on_corrupt),
        decoded_shape: [decode.shape.channels, decode.shape.height, decode.shape.width],
        resize: d.resize,
        batches: times.batches,
        read_ms: per_batch(times.read_s),
        decode_ms: per_batch(times.decode_s),
        transform_ms: per_batch(times.transform_s),
        skipped: times.skipped_train.len() + times.skipped_test.len(),
        skipped_train: times.skipped_train.len(),
        skipped_test: times.skipped_test.len(),
        skipped_examples: times.skipped_examples,
        cut_files: splits
            .iter()
            .flat_map(|s| s.cut_files())
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .map(|(at, unread_bytes)| benchkit_schema::CutFile { at, unread_bytes })
            .collect(),
        vocabulary: None,
        max_tokens: None,
    }
}

/// Hand `message` to the parent on stdout.
fn send(message: &CellMessage) {
    if let Ok(json) = serde_json::to_string(message) {
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{MARK}{json}").and_then(|()| out.flush()).is_err() {
            // The parent is gone (killed or interrupted): nobody will read the result.
            std::process::exit(1);
        }
    }
}

/// The cell process: read a [`CellOrder`] from stdin, run it, write
/// [`CellMessage`]s to stdout.
pub fn serve() -> Result<(), RunnerError> {
    let mut input = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut input)
        .map_err(|e| RunnerError::Setup(format!("cell process: cannot read its order: {e}")))?;
    let order: CellOrder = serde_json::from_str(&input)
        .map_err(|e| RunnerError::Setup(format!("cell process: the order is not valid: {e}")))?;
    if let Some(limit) = order.cell.plan.train.memory_limit_mib {
        crate::measure::memory::enforce_limit(limit, |why| send(&CellMessage::Failed(Failure::plain(why))))
            .map_err(|e| {
            RunnerError::Setup(format!(
                "cell process: cannot start the watcher of train.memory_limit_mib = {limit}: {e}"
            ))
        })?;
    }
    let mut tell = |message: CellMessage| send(&message);
    let outcome = run_cell(&order.cell, order.repeat, order.world, &mut tell);
    if let Err(e) = &outcome {
        tell(failure_of(e));
    }
    outcome.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the child says of an error, read back as the parent reads its
    /// stdout: a lost peer is its own message and worth trying again; any
    /// other error is the cell's own and would recur.
    #[test]
    fn a_failure_reaches_the_parent_with_its_kind() {
        let said = |e: RunnerError| {
            let line = format!("{MARK}{}", serde_json::to_string(&failure_of(&e)).unwrap());
            serde_json::from_str::<CellMessage>(line.strip_prefix(MARK).unwrap()).unwrap()
        };
        let CellMessage::LostPeer(lost) =
            said(RunnerError::Train(TrainError::LostPeer("rank 1 went away".into())))
        else {
            panic!("a lost peer is told as one")
        };
        assert_eq!((lost.kind, lost.plugin.as_deref()), (FailureKind::Transient, None));
        assert!(lost.reason.contains("rank 1 went away"), "{}", lost.reason);
        let CellMessage::Failed(own) = said(RunnerError::Setup("no such file\u{1b}[31m".into())) else {
            panic!("a setup error is the cell's own")
        };
        assert_eq!(own.kind, FailureKind::Deterministic);
        assert!(!own.reason.contains('\u{1b}'), "control sequences are cleaned: {:?}", own.reason);
    }
}
