//! One repeat of one cell, as the cell process runs it: prepare, train,
//! summarise. Progress goes to the parent as `@benchkit <json>` lines on
//! stdout; the parent ignores any other line a library prints there.

use super::{loader_config, prepare, Prepared, RunError};
use crate::analysis::{cell_result, CellMeta};
use crate::backend;
use crate::config::{Cell, Mode, Plan};
use crate::data::DataError;
use crate::data::ProcessShare;
use crate::data::{Decode, Loader, Pipeline, Shuffle, SourceKind, Split};
use crate::measure::energy::{gpu_joules, Rapl, POWERCAP};
use crate::measure::env::unix_ms;
use crate::plugin::text::{clean_line, MESSAGE_BYTES};
use crate::plugin::PluginError;
use crate::report::{CellResult, LoaderReport};
use crate::train::{loader_only, CellJob, EpochRecord, Hits, Task, TrainError, TrainOutcome, World};
use benchkit_schema::FailureKind;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Instant;

/// What the parent asks a cell process to run (sent as JSON on its stdin).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CellOrder {
    pub cell: Cell,
    /// 1-based.
    pub repeat: u32,
    /// This process's place when several processes train the cell together.
    #[serde(default)]
    pub world: Option<World>,
}

/// What a cell process tells its parent.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "kebab-case")]
pub enum CellMessage {
    Step {
        done: usize,
        total: usize,
    },
    Epoch(EpochRecord),
    /// What the process is doing now, before training steps report it.
    Phase(String),
    /// What each rank did over time, before `Done` (with a trace window).
    Timeline(Box<benchkit_schema::CellTimeline>),
    Done(Box<CellResult>),
    /// Why the cell failed, as structured data: the parent records this,
    /// never text it finds on the process's stderr.
    Failed(FailureCause),
}

/// Why a cell failed: which plugin and call, if a plugin was at fault, and
/// the message. Plugin text in it is already cleaned and bounded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FailureCause {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    pub message: String,
    /// The cell process's last stderr lines, when it died without a cause.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stderr_tail: Vec<String>,
    /// Whether trying again could end otherwise.
    #[serde(default)]
    pub kind: FailureKind,
    /// The last phase the cell process reached, as its parent saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The cell broke off because another process of it went away.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lost_peer: bool,
}

impl FailureCause {
    /// A deterministic failure no plugin is named in.
    pub fn plain(message: impl Into<String>) -> Self {
        Self { message: message.into(), ..Self::default() }
    }

    /// A transient failure (killed, timed out, a lost peer): worth trying again.
    pub fn transient(message: impl Into<String>) -> Self {
        Self { message: message.into(), kind: FailureKind::Transient, ..Self::default() }
    }

    /// The cause of `error`, naming the plugin and call when one failed.
    pub fn of(error: &RunError) -> Self {
        let plugin = match error {
            RunError::Plugin(p) => Some(p),
            RunError::Data(DataError::Transform(e))
            | RunError::Train(TrainError::Data(DataError::Transform(e))) => e.downcast_ref::<PluginError>(),
            _ => None,
        };
        let (plugin, call) = match plugin.map(PluginError::origin) {
            Some((plugin, call)) => (Some(plugin.to_string()), call.map(str::to_string)),
            None => (None, None),
        };
        // A peer lost mid-step may be back next time; anything else the
        // cell itself raised (config, data, plugin, memory) would recur.
        let lost_peer = matches!(error, RunError::Train(TrainError::LostPeer(_)));
        let kind = if lost_peer { FailureKind::Transient } else { FailureKind::Deterministic };
        Self {
            plugin,
            call,
            message: clean_line(&error.to_string(), 4 * MESSAGE_BYTES),
            stderr_tail: Vec::new(),
            kind,
            phase: None,
            lost_peer,
        }
    }
}

/// Marks protocol lines on a cell process's stdout.
pub const MARK: &str = "@benchkit ";

/// Train one repeat of `cell`, reporting progress to `tell`.
///
/// Formula: the result's model is the model plugin's own name (its info.name).
pub fn run_cell(
    cell: &Cell,
    repeat: u32,
    world: Option<World>,
    tell: &mut dyn FnMut(CellMessage),
) -> Result<CellResult, RunError> {
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
    let mut loader = Loader::new(transforms, decode, loader_config(plan));
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
            let (outcome, engine) = in_pytorch(cell, &graph, task, model_name, (train_len, test_len))?;
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

/// Train `cell` in PyTorch: its exported script, run by the user's Python
/// in a folder of its own, which is removed after; it evaluates as many
/// test images after each epoch as the cell's test split holds.
fn in_pytorch(
    cell: &Cell,
    graph: &crate::model::Graph,
    task: Task,
    model: String,
    (train_len, test_images): (usize, usize),
) -> Result<(TrainOutcome, benchkit_schema::Engine), RunError> {
    let plan = &cell.plan;
    let steps_per_epoch = crate::train::lr_schedule::steps_per_epoch(&plan.train, train_len)?;
    let facts = crate::export::CellFacts { cell, graph, task, model, steps_per_epoch, test_images };
    let script = crate::export::torch_script(&facts).map_err(|e| RunError::Setup(e.to_string()))?;
    let data = (plan.data.source != SourceKind::Synthetic).then(|| {
        format!(
            "synthetic images of the cell's shape {:?}, not its {} data",
            graph.input_shape(),
            plan.data.source
        )
    });
    let mut args = Vec::new();
    if let Some(threads) = plan.train.parallel.threads_per_device {
        args.extend(["--threads".to_string(), threads.to_string()]);
    }
    // A folder of this process's own, made fresh (mkdtemp: a random name,
    // mode 0700): on a shared machine no other user can have planted it or
    // swap the script inside before Python runs it. Removed when dropped.
    let dir = tempfile::Builder::new().prefix("benchkit-pytorch-").tempdir().map_err(|source| {
        RunError::Write { path: std::env::temp_dir().join("benchkit-pytorch-*"), source }
    })?;
    Ok(crate::train::pytorch::train(plan.backend, &script, &args, dir.path(), data)?)
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
pub fn serve() -> Result<(), RunError> {
    let mut input = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut input)
        .map_err(|e| RunError::Setup(format!("cell process: cannot read its order: {e}")))?;
    let order: CellOrder = serde_json::from_str(&input)
        .map_err(|e| RunError::Setup(format!("cell process: the order is not valid: {e}")))?;
    if let Some(limit) = order.cell.plan.train.memory_limit_mib {
        crate::measure::memory::enforce_limit(limit, |why| {
            send(&CellMessage::Failed(FailureCause::plain(why)))
        })
        .map_err(|e| {
            RunError::Setup(format!(
                "cell process: cannot start the watcher of train.memory_limit_mib = {limit}: {e}"
            ))
        })?;
    }
    let mut tell = |message: CellMessage| send(&message);
    let outcome = run_cell(&order.cell, order.repeat, order.world, &mut tell);
    if let Err(e) = &outcome {
        tell(CellMessage::Failed(FailureCause::of(e)));
    }
    outcome.map(|_| ())
}
