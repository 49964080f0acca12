//! Cell assembly: everything a cell needs, loaded and checked before any
//! training starts: its plugins and their kinds, its data and the shape
//! samples decode to, the model graph against the data and the memory
//! budget, and the transform's output against the model's input. Nothing
//! here trains or writes results.

use crate::config::{Balance, Cell, Mode, Plan, PluginPlan};
use crate::data::{
    self, DataError, Dataset, Decode, ImageShape, LoaderConfig, OpenSpec, Pipeline, SourceKind, Transform,
};
use crate::model::graph::{MemoryEstimate, ReplicaMemory};
use crate::model::Graph;
use crate::plugin::{InputSpec, Plugin, PluginError, PluginHost, PluginKind, PluginSource};
use crate::report::PluginUse;
use crate::runner::RunnerError;

/// Everything checked and loaded before training starts.
pub struct Prepared {
    pub host: PluginHost,
    pub model: Plugin,
    pub transform: Plugin,
    pub dataset: Dataset,
    pub decode: Decode,
    pub graph: Graph,
    /// What training the graph would hold in this process.
    pub memory: MemoryEstimate,
    /// One transform instance per loader worker.
    pub transforms: Vec<Box<dyn Transform>>,
}

fn plugin_use(role: &str, p: &Plugin) -> PluginUse {
    PluginUse {
        role: role.into(),
        origin: p.origin.clone(),
        name: p.info.name.clone(),
        version: p.info.version.clone(),
        sha256: p.sha256.clone(),
    }
}

pub(crate) fn load(host: &PluginHost, plan: &PluginPlan, kind: PluginKind) -> Result<Plugin, PluginError> {
    let plugin = host.load(&plan.source)?;
    PluginHost::expect_kind(&plugin, kind, &plan.key)?;
    Ok(plugin)
}

/// The memory budget a cell's model must fit in this process, and whose
/// it is; `None` when neither the config nor the system says.
///
/// Formula: budget = plugins.model_memory_mib, else the GPU's memory, else min(the machine's
/// memory, its cgroup's limit) / the cell's processes on this machine.
fn memory_budget(plan: &Plan) -> Option<(u64, String)> {
    if let Some(mib) = plan.plugin_limits.model_memory_mib {
        return Some((mib.saturating_mul(1 << 20), "plugins.model_memory_mib".into()));
    }
    let gpu = if plan.backend.is_gpu() { crate::measure::gpu::device_memory_bytes(0) } else { None };
    if let Some(bytes) = gpu {
        return Some((bytes, "the GPU's memory; set plugins.model_memory_mib to change it".into()));
    }
    let machine = crate::measure::env::machine_memory_bytes();
    let limit = crate::measure::env::cgroup_memory_limit_bytes();
    let (bytes, what) = match (machine, limit) {
        (Some(m), Some(l)) if l < m => (l, "this process's cgroup memory limit"),
        (Some(m), _) => (m, "this machine's memory"),
        (None, Some(l)) => (l, "this process's cgroup memory limit"),
        (None, None) => return None,
    };
    Some(share_of(bytes, what, plan.train.parallel.machine_processes))
}

/// `bytes` of memory (`what` names it) shared by `processes` processes:
/// each one's budget, and whose it is.
fn share_of(bytes: u64, what: &str, processes: usize) -> (u64, String) {
    let change = "set plugins.model_memory_mib to change it";
    match processes {
        0 | 1 => (bytes, format!("{what}; {change}")),
        n => (
            bytes / n as u64,
            format!(
                "{what}, {} MiB, shared by the cell's {n} processes on this machine; {change}",
                crate::units::whole_mib(bytes)
            ),
        ),
    }
}

/// What training `graph` as `plan` says would hold in the memory its
/// budget is for ([`replica_memory`]): the process's data-parallel replicas
/// ([`Graph::data_parallel_estimate`]), or what a pipeline's micro-batches keep.
pub fn training_memory(plan: &Plan, model: &Plugin, graph: &Graph) -> Result<MemoryEstimate, RunnerError> {
    let batch = plan.train.local_batch();
    let value_bytes = plan.train.precision.bytes();
    let Some(p) = &plan.train.parallel.pipeline else {
        return Ok(graph.data_parallel_estimate(batch, value_bytes, replicas(plan), replica_memory(plan)));
    };
    let mut need = graph.memory_estimate(batch, value_bytes);
    let nodes = match &p.balance {
        Balance::Nodes(n) => Some(n.as_slice()),
        Balance::Estimated | Balance::Measured => None,
    };
    let cut = graph
        .stage_plan(p.stages, nodes, None)
        .map_err(|e| RunnerError::Setup(format!("cannot cut model {} into stages: {e}", model.origin)))?;
    let recomputed = (0..p.micro_batches).filter(|&m| p.checkpoint.recomputes(m, p.micro_batches)).count();
    let micro = batch.div_ceil(p.micro_batches.max(1)) as u64;
    need.activation_bytes =
        cut.step_values(graph, p.micro_batches, recomputed).saturating_mul(micro).saturating_mul(value_bytes);
    need.scratch_bytes = need.scratch_bytes.div_ceil(batch.max(1) as u64).saturating_mul(micro);
    Ok(need)
}

/// The data-parallel replicas of one of a cell's processes (1 for a pipeline,
/// whose stages the estimate counts apart).
fn replicas(plan: &Plan) -> usize {
    match plan.train.parallel.pipeline {
        Some(_) => 1,
        None => plan.train.parallel.devices,
    }
}

/// Where a cell's replicas hold their memory: a GPU each, or side by side
/// in the process's. A GPU cell whose GPU gave no memory size is checked
/// against the machine's with one GPU's part: a looser check, not a wrong one.
fn replica_memory(plan: &Plan) -> ReplicaMemory {
    match plan.backend.is_gpu() {
        true => ReplicaMemory::PerDevice,
        false => ReplicaMemory::Shared,
    }
}

/// How `batch` images train over `replicas`, as a refusal says it.
fn batch_words(batch: usize, replicas: usize, memory: ReplicaMemory) -> String {
    match (replicas, memory) {
        (0 | 1, _) => format!("at batch {batch}"),
        (r, ReplicaMemory::Shared) => format!("at batch {batch} over {r} replicas side by side"),
        (r, ReplicaMemory::PerDevice) => {
            format!("at {} images a device (batch {batch} over {r} devices)", batch.div_ceil(r))
        }
    }
}

/// The words a refusal by the memory estimate says: a batch search reads a
/// trial refused with them as a batch too large.
pub(crate) const OVER_BUDGET: &str = "more than the budget of";

/// Refuse a graph whose training (or evaluation) would need more memory
/// than this process's budget ([`memory_budget`]: `plugins.model_memory_mib`,
/// else the GPU's, else its share of the machine's), before burn allocates any of it, naming the node that holds
/// the most. The estimate, when the graph fits. A loader-only cell builds
/// no model, so nothing is refused.
fn check_model_memory(plan: &Plan, model: &Plugin, graph: &Graph) -> Result<MemoryEstimate, RunnerError> {
    let need = training_memory(plan, model, graph)?;
    let Some((budget, whose)) = memory_budget(plan).filter(|_| plan.mode == Mode::Train) else {
        return Ok(need);
    };
    let value_bytes = plan.train.precision.bytes();
    let batch = batch_words(plan.train.local_batch(), replicas(plan), replica_memory(plan));
    let eval = graph.eval_peak_bytes(plan.train.eval_batch_size, value_bytes);
    let node = need.largest.as_ref().map_or(String::new(), |n| {
        format!(
            "; node `{}` ({}) alone holds {} MiB",
            crate::plugin::text::clean_line(&n.name, 256),
            n.op,
            crate::units::whole_mib(n.bytes)
        )
    });
    if need.total_bytes() > budget {
        return Err(RunnerError::Setup(format!(
            "model {} would need about {} MiB to train {} in {} ({} MiB of parameters, gradients and momentum, {} MiB kept for the backward pass, {} MiB of working memory for the largest op){node}: {OVER_BUDGET} {} MiB ({whose})",
            model.origin,
            crate::units::whole_mib(need.total_bytes()),
            batch,
            plan.train.precision,
            crate::units::whole_mib(need.parameter_bytes),
            crate::units::whole_mib(need.activation_bytes),
            crate::units::whole_mib(need.scratch_bytes),
            crate::units::whole_mib(budget),
        )));
    }
    if eval > budget {
        return Err(RunnerError::Setup(format!(
            "model {} would need about {} MiB to evaluate at train.eval_batch_size = {}, {OVER_BUDGET} {} MiB ({whose}); lower train.eval_batch_size",
            model.origin,
            crate::units::whole_mib(eval),
            plan.train.eval_batch_size,
            crate::units::whole_mib(budget),
        )));
    }
    Ok(need)
}

/// Open the plan's dataset and settle the shape every sample decodes to.
pub fn open_data(plan: &Plan) -> Result<(Dataset, Decode), DataError> {
    let d = &plan.data;
    let [c, h, w] = d.shape;
    let dataset = data::open(&OpenSpec {
        kind: d.source,
        path: d.path.as_deref(),
        num_classes: d.num_classes,
        train_limit: d.train_limit,
        test_limit: d.test_limit,
        synthetic: Some((ImageShape { channels: c, height: h, width: w }, d.samples, d.test_samples)),
        tokenizer: d.tokenizer,
        test_fraction: d.test_fraction,
        labels: d.labels.as_deref(),
        streams: d.streams.clone(),
        seed: plan.seed,
    })?;
    let stored = dataset.train.shape();
    let [height, width] = d.resize.unwrap_or([stored.height, stored.width]);
    let shape = ImageShape { channels: d.channels.unwrap_or(stored.channels), height, width };
    // The first sample's header sets the decode shape: its batches are
    // bounded before a loader allocates one.
    let batch = plan.train.local_batch().max(plan.train.eval_batch_size) as u64;
    let bytes = (shape.len() as u64).saturating_mul(batch);
    if bytes > crate::bounds::BATCH_BYTES {
        return Err(DataError::Sample {
            at: dataset.train.locate(0),
            message: format!(
                "decoding to {} × {} × {} makes batches of {batch} take {bytes} bytes, over the bound of {} bytes; \
                 set data.resize",
                shape.channels,
                shape.height,
                shape.width,
                crate::bounds::BATCH_BYTES
            ),
        });
    }
    Ok((dataset, Decode { shape, resize: d.resize.is_some() }))
}

/// The loader settings of a plan.
pub fn loader_config(plan: &Plan) -> LoaderConfig {
    let d = &plan.data;
    LoaderConfig {
        batch_size: plan.train.local_batch(),
        eval_batch_size: plan.train.eval_batch_size,
        pipeline: d.pipeline,
        workers: d.workers,
        prefetch: d.prefetch,
        shuffle: d.shuffle,
        interleave: d.interleave,
        seed: plan.seed,
        on_corrupt: d.on_corrupt,
        fixed: d.source == SourceKind::Synthetic,
        drop_last: plan.train.drop_last,
        spans: plan.train.timeline.is_some(),
        read_delay_us: 0,
    }
}

/// Load and check everything a cell needs, without training: its model and
/// transform plugins (and their kinds), data, the model graph and the
/// transform's config.
pub fn prepare(plan: &Plan) -> Result<Prepared, RunnerError> {
    let host = PluginHost::new(plan.plugin_limits)?;
    let model = load(&host, &plan.model, PluginKind::Model)?;
    let transform = load(&host, &plan.transform, PluginKind::Transform)?;
    let (dataset, decode) = open_data(plan)?;
    let (vocab_size, max_tokens) = match &dataset.vocabulary {
        Some((v, longest)) => (v.len() as u32, longest.saturating_sub(1) as u32),
        None => (0, 0),
    };
    let spec = InputSpec {
        shape: decode.shape.into(),
        num_classes: dataset.num_classes,
        vocab_size,
        max_tokens,
        detection: dataset.detection,
    };
    let wit_graph = host.describe(&model, &plan.model.config_json(), spec)?;
    let graph = Graph::from_wit(&wit_graph, (max_tokens > 0).then_some(max_tokens as usize))?;
    let memory = check_model_memory(plan, &model, &graph)?;
    check_graph_fits_data(plan, &model, &graph, &dataset, (vocab_size, max_tokens))?;
    let target = match graph.input_shape() {
        &[c, h, w] => ImageShape { channels: c as u32, height: h as u32, width: w as u32 },
        other => {
            return Err(RunnerError::Setup(format!(
                "model input shape {other:?} is not [channels, height, width]"
            )))
        }
    };
    let instances = match (plan.data.pipeline, plan.data.source) {
        (_, SourceKind::Synthetic) | (Pipeline::Naive, _) => 1,
        (Pipeline::Optimized, _) => plan.data.workers,
    };
    let transforms = (0..instances)
        .map(|_| {
            let t = host.transform(&transform, &plan.transform.config_json(), decode.shape, target)?;
            Ok(Box::new(t) as Box<dyn Transform>)
        })
        .collect::<Result<Vec<_>, PluginError>>()?;
    let transform_instance = &transforms[0];
    if transform_instance.output_shape() != target {
        return Err(RunnerError::Setup(format!(
            "transform {} produces {} images but model {} wants {}",
            transform.origin,
            transform_instance.output_shape(),
            model.origin,
            target
        )));
    }
    Ok(Prepared { host, model, transform, dataset, decode, graph, memory, transforms })
}

/// The model's output against the data's targets: a sequence model on
/// captions, a classifier with one output per class or label.
fn check_graph_fits_data(
    plan: &Plan,
    model: &Plugin,
    graph: &Graph,
    dataset: &Dataset,
    (vocab_size, max_tokens): (u32, u32),
) -> Result<(), RunnerError> {
    let path = || plan.data.path.as_deref().map_or("?".into(), |p| p.display().to_string());
    let detector = graph.nodes[graph.output].op.default_boxes().map(|(_, classes)| classes);
    match (detector, dataset.detection) {
        (Some(classes), true) if classes != dataset.num_classes as usize + 1 => {
            return Err(RunnerError::Setup(format!(
                "detector {} scores {classes} classes with the background, but data {} has {} object classes; set the model's num_classes to {} or data.labels",
                model.origin,
                path(),
                dataset.num_classes,
                dataset.num_classes + 1
            )))
        }
        (Some(_), true) => return Ok(()),
        (Some(_), false) if plan.mode == Mode::Train => {
            return Err(RunnerError::Setup(format!(
                "model {} is a detector, but data {} has no boxes; use data.source = \"voc\"",
                model.origin,
                path()
            )))
        }
        (None, true) if plan.mode == Mode::Train => {
            return Err(RunnerError::Setup(format!(
                "data {} has boxes, and model {} is not a detector (its graph does not end in `default_boxes`); train builtin:ssd on it, or run it with mode = \"loader-only\"",
                path(),
                model.origin
            )))
        }
        _ => {}
    }
    match (graph.reads_tokens(), vocab_size > 0) {
        (true, true) => {
            if graph.output_shape() != [max_tokens as usize, vocab_size as usize] {
                return Err(RunnerError::Setup(format!(
                    "sequence model {} outputs shape {:?}, but the captions need [tokens, vocabulary] = [{max_tokens}, {vocab_size}]",
                    model.origin,
                    graph.output_shape(),
                )));
            }
        }
        (false, true) if plan.mode == Mode::Train => {
            return Err(RunnerError::Setup(format!(
                "data source \"captions\" ({}) has captions, not class labels, and model {} does not read them; train a sequence model such as builtin:captioner on it, or run it with mode = \"loader-only\" to measure the pipeline",
                path(),
                model.origin
            )))
        }
        (true, false) => {
            return Err(RunnerError::Setup(format!(
                "model {} is a sequence model (it reads caption tokens), but data {} has no captions; use data.source = \"captions\"",
                model.origin,
                path()
            )))
        }
        _ => {
            if plan.mode == Mode::Train && graph.output_shape() != [dataset.num_classes as usize] {
                let (what, fix) = if dataset.multi_label {
                    ("labels", "data.labels")
                } else {
                    ("classes", "data.num_classes")
                };
                return Err(RunnerError::Setup(format!(
                    "model {} outputs shape {:?} but the dataset has {} {what}; set the model's num_classes or {fix}",
                    model.origin,
                    graph.output_shape(),
                    dataset.num_classes
                )));
            }
        }
    }
    Ok(())
}

/// The plugins every cell and the reporters use, each loaded (and so checked) once.
pub fn load_plugins(
    host: &PluginHost,
    cells: &[Cell],
    reporters: &[PluginPlan],
) -> Result<Vec<PluginUse>, RunnerError> {
    let mut seen: Vec<PluginSource> = Vec::new();
    let mut uses = Vec::new();
    let wanted = cells
        .iter()
        .flat_map(|c| {
            [
                (&c.plan.model, PluginKind::Model, "model"),
                (&c.plan.transform, PluginKind::Transform, "transform"),
            ]
        })
        .chain(reporters.iter().map(|r| (r, PluginKind::Reporter, "reporter")));
    for (plan, kind, role) in wanted {
        if seen.contains(&plan.source) {
            continue;
        }
        seen.push(plan.source.clone());
        uses.push(plugin_use(role, &load(host, plan, kind)?));
    }
    Ok(uses)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal's words for 256 images over 4 replicas.
    #[test]
    fn a_refusal_says_how_the_batch_trains() {
        assert_eq!(batch_words(256, 1, ReplicaMemory::Shared), "at batch 256");
        assert_eq!(batch_words(256, 4, ReplicaMemory::Shared), "at batch 256 over 4 replicas side by side");
        assert_eq!(
            batch_words(250, 4, ReplicaMemory::PerDevice),
            "at 63 images a device (batch 250 over 4 devices)"
        );
    }

    /// 24 GiB shared by 2 processes: 12 GiB each, the whole named.
    #[test]
    fn the_processes_on_a_machine_share_its_memory() {
        let (each, whose) = share_of(24 << 30, "this machine's memory", 2);
        assert_eq!(each, 12 << 30);
        assert_eq!(
            whose,
            "this machine's memory, 24576 MiB, shared by the cell's 2 processes on this machine; set plugins.model_memory_mib to change it"
        );
        let (each, whose) = share_of(24 << 30, "this machine's memory", 1);
        assert_eq!(
            (each, whose.as_str()),
            (24 << 30, "this machine's memory; set plugins.model_memory_mib to change it")
        );
        assert_eq!(share_of(10, "x", 3).0, 3, "rounded down: never more than a share");
    }
}
