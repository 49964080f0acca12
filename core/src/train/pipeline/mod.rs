//! Pipeline parallelism as GPipe does it: the model cut into stages, each
//! on its own GPU, or on the CPU on its own thread (its own pool of
//! `threads_per_device` threads), every global batch cut into micro-batches
//! that flow forward through the stages and back, gradients accumulated
//! over them and one optimizer step per batch on every stage.
//!
//! Autodiff graphs do not cross threads: a stage hands on its outputs
//! without their graph, the next takes them as leaves of its own, and the
//! gradients of those leaves flow back the same way.
//!
//! Batch norm normalises each micro-batch by that micro-batch's statistics
//! and moves its running statistics once per micro-batch (as torchgpipe
//! does without its deferred batch norm): with batch norm and more than one
//! micro-batch, a step equals gradient accumulation over the micro-batches
//! on one device, not one step on the whole batch. A re-materialised
//! micro-batch moves the running statistics in its first forward pass only.

mod stage;
#[cfg(test)]
mod tests;

use super::records::Stepped;
use super::task::Task;
use super::TrainError;
use crate::config::{Balance, StagedPipeline, TrainPlan};
use crate::data::Batch;
use crate::model::{Graph, GraphNet};
use benchkit_schema::{PipelineReport, StageReport};
use burn::module::Module;
use burn::tensor::backend::AutodiffBackend;
use stage::{serve, Links, Order, Report, StageSetup};
use std::sync::mpsc::{channel, Receiver, Sender};

type Inner<B> = <B as AutodiffBackend>::InnerBackend;

struct Handle<B: AutodiffBackend> {
    /// Closed (taken) to stop the stage.
    orders: Option<Sender<Order>>,
    reports: Receiver<Report<B>>,
}

/// The stages being trained.
pub(crate) struct Pipeline<B: AutodiffBackend> {
    stages: Vec<Handle<B>>,
    micro_batches: usize,
    /// Where the joined model is evaluated.
    device: B::Device,
    /// The layout, and the measured figures once [`Pipeline::report`] fills them.
    layout: PipelineReport,
}

impl<B: AutodiffBackend> Drop for Pipeline<B> {
    fn drop(&mut self) {
        for stage in &mut self.stages {
            stage.orders.take();
        }
    }
}

/// Cut `model` (built from `graph`) into the stages of `pipeline`, placed
/// on `devices` in contiguous groups, and start each stage's thread.
pub(crate) fn start<B: AutodiffBackend>(
    model: GraphNet<B>,
    graph: &Graph,
    devices: Vec<B::Device>,
    plan: &TrainPlan,
    pipeline: &StagedPipeline,
    task: Task,
) -> Result<Pipeline<B>, TrainError> {
    model.materialise();
    let device = devices.first().cloned().unwrap_or_default();
    let (nodes, costs) = match &pipeline.balance {
        Balance::Nodes(n) => (Some(n.as_slice()), None),
        Balance::Estimated => (None, None),
        Balance::Measured => {
            let micro = plan.batch_size.div_ceil(pipeline.micro_batches.max(1));
            (None, Some(measured_costs(&model, graph, micro, &device)?))
        }
    };
    let cut = graph
        .stage_plan(pipeline.stages, nodes, costs.as_deref())
        .map_err(|e| TrainError::Setup(format!("cannot cut the model into stages: {e}")))?;
    let layout = layout(graph, &cut, plan, pipeline);
    let parts = model.split(&cut);
    let s = parts.len();
    let cut_channels = || -> Vec<(Option<Sender<_>>, Option<Receiver<_>>)> {
        (1..s)
            .map(|_| {
                let (tx, rx) = channel();
                (Some(tx), Some(rx))
            })
            .collect()
    };
    let (mut forward, mut backward) = (cut_channels(), cut_channels());
    let mut stages = Vec::with_capacity(s);
    for (k, part) in parts.into_iter().enumerate() {
        let links = Links::<B> {
            from_previous: k.checked_sub(1).and_then(|p| forward[p].1.take()),
            to_next: forward.get_mut(k).and_then(|c| c.0.take()),
            grads_from_next: backward.get_mut(k).and_then(|c| c.1.take()),
            grads_to_previous: k.checked_sub(1).and_then(|p| backward[p].0.take()),
        };
        let own = devices.get(k * devices.len() / s).cloned().unwrap_or_default();
        let setup = StageSetup {
            net: part.with_own_running_stats().fork(&own),
            device: own,
            task,
            checkpoint: pipeline.checkpoint,
            links,
        };
        stages.push(spawn(k, setup, plan)?);
    }
    let mut pipeline = Pipeline { stages, micro_batches: pipeline.micro_batches, device, layout };
    for k in 0..s {
        match pipeline.receive(k)? {
            Report::Ready => {}
            _ => return Err(out_of_step(k)),
        }
    }
    Ok(pipeline)
}

fn spawn<B: AutodiffBackend>(
    k: usize,
    setup: StageSetup<B>,
    plan: &TrainPlan,
) -> Result<Handle<B>, TrainError> {
    let (orders, their_orders) = channel();
    let (their_reports, reports) = channel();
    let plan = plan.clone();
    let threads = plan.parallel.threads_per_device;
    std::thread::Builder::new()
        .name(format!("benchkit-stage-{k}"))
        .spawn(move || {
            let work = move || {
                let failed = their_reports.clone();
                if let Err(message) = serve::<B>(setup, &plan, their_orders, their_reports) {
                    let _ = failed.send(Report::Failed(format!("pipeline stage {k}: {message}")));
                }
            };
            match threads.map(|t| rayon::ThreadPoolBuilder::new().num_threads(t).build()) {
                Some(Ok(pool)) => pool.install(work),
                _ => work(),
            }
        })
        .map_err(|e| TrainError::Backend(format!("cannot start the thread of pipeline stage {k}: {e}")))?;
    Ok(Handle { orders: Some(orders), reports })
}

/// Each node's forward seconds on a `micro`-image batch of zeros, the
/// fastest of two passes on the whole network without autodiff.
fn measured_costs<B: AutodiffBackend>(
    model: &GraphNet<B>,
    graph: &Graph,
    micro: usize,
    device: &B::Device,
) -> Result<Vec<f64>, TrainError> {
    use burn::module::AutodiffModule;
    use burn::tensor::{Int, Tensor};
    let net = model.valid();
    let shape = graph.input_shape();
    let inputs = || {
        let images = Tensor::<Inner<B>, 4>::zeros([micro, shape[0], shape[1], shape[2]], device);
        let tokens = graph
            .reads_tokens()
            .then(|| Tensor::<Inner<B>, 2, Int>::zeros([micro, graph.nodes[1].shape[0]], device));
        crate::model::Carried::inputs(images, tokens)
    };
    let first = net.node_seconds(inputs()).map_err(TrainError::Backend)?;
    let second = net.node_seconds(inputs()).map_err(TrainError::Backend)?;
    Ok(first.iter().zip(&second).map(|(a, b)| a.min(*b)).collect())
}

/// The stages' layout, before anything is measured.
fn layout(
    graph: &Graph,
    cut: &crate::model::graph::StagePlan,
    plan: &TrainPlan,
    pipeline: &StagedPipeline,
) -> PipelineReport {
    let micro = plan.batch_size.div_ceil(pipeline.micro_batches.max(1));
    let mib =
        |values: u64| (values as f64) * (micro as f64) * plan.precision.bytes() as f64 / (1024.0 * 1024.0);
    let m = pipeline.micro_batches as f64;
    let held = cut.held_values(graph);
    let per_stage = cut
        .ranges
        .iter()
        .enumerate()
        .map(|(k, range)| {
            let (full, input) = held[k];
            let activations = mib(full);
            StageReport {
                nodes: range.len(),
                first_node: graph.nodes[range.start].name.clone(),
                last_node: graph.nodes[range.end - 1].name.clone(),
                params: graph.nodes[range.clone()].iter().map(|n| n.op.num_params()).sum(),
                cost_share: cut.cost_share[k],
                busy_ms: f64::NAN,
                idle_ms: f64::NAN,
                activation_mib: m * activations,
                rematerialised_mib: m * mib(input) + activations,
            }
        })
        .collect();
    PipelineReport {
        stages: cut.ranges.len(),
        micro_batches: pipeline.micro_batches,
        micro_batch: micro,
        checkpoint: pipeline.checkpoint.name().into(),
        devices: pipeline.devices,
        balance: pipeline.balance.name().into(),
        ideal_bubble: PipelineReport::ideal(cut.ranges.len(), pipeline.micro_batches),
        measured_bubble: f64::NAN,
        per_stage,
    }
}

impl<B: AutodiffBackend> Pipeline<B> {
    fn receive(&mut self, k: usize) -> Result<Report<B>, TrainError> {
        match self.stages[k].reports.recv() {
            Ok(Report::Failed(message)) => Err(TrainError::Backend(message)),
            Ok(report) => Ok(report),
            Err(_) => Err(TrainError::Backend(format!(
                "pipeline stage {k} stopped unexpectedly (its thread ended)"
            ))),
        }
    }

    fn send(&mut self, k: usize, order: Order) -> Result<(), TrainError> {
        let sent = self.stages[k].orders.as_ref().is_some_and(|o| o.send(order).is_ok());
        if sent {
            Ok(())
        } else {
            Err(TrainError::Backend(format!("pipeline stage {k} stopped unexpectedly (its thread ended)")))
        }
    }

    /// One training step on `batch` at learning rate `lr`; each stage's
    /// busy seconds come back in `stage_busy_s`.
    pub fn step(&mut self, batch: Batch, lr: f64) -> Result<Stepped<Inner<B>>, TrainError> {
        let images = batch.count;
        let micro = batch.split(self.micro_batches);
        if micro.iter().any(|b| b.count == 0) {
            return Err(TrainError::Backend(format!(
                "a batch of {images} images cannot give each of {} micro-batches at least one",
                self.micro_batches
            )));
        }
        let (count, last) = (micro.len(), self.stages.len() - 1);
        for k in 0..=last {
            let own = if k == 0 || k == last { micro.clone() } else { Vec::new() };
            self.send(k, Order::Step { micro: own, count, lr })?;
        }
        let mut out = Stepped::empty();
        for k in 0..=last {
            let Report::Stepped { busy_s, scores } = self.receive(k)? else { return Err(out_of_step(k)) };
            out.stage_busy_s.push(busy_s);
            if let Some(s) = scores {
                out.losses.push(s.loss);
                out.correct.push(s.correct);
                out.total = s.total;
                out.ranked = s.ranked;
            }
        }
        Ok(out)
    }

    /// The stages joined into one model without autodiff, for evaluation.
    pub fn model(&mut self) -> Result<GraphNet<Inner<B>>, TrainError> {
        let mut parts = Vec::with_capacity(self.stages.len());
        for k in 0..self.stages.len() {
            self.send(k, Order::Model)?;
            let Report::Model(part) = self.receive(k)? else { return Err(out_of_step(k)) };
            parts.push(part);
        }
        GraphNet::join(parts, &self.device)
            .ok_or_else(|| TrainError::Backend("a pipeline without stages".into()))
    }

    /// The layout with the measured figures: `busy_s` summed per stage
    /// over `steps` measured steps that took `step_s` in all.
    ///
    /// Formula: measured bubble = 1 − Σ busy / (stages × step seconds).
    pub fn report(&self, busy_s: &[f64], step_s: f64, steps: usize) -> PipelineReport {
        let mut report = self.layout.clone();
        let per_step = |s: f64| if steps > 0 { 1000.0 * s / steps as f64 } else { f64::NAN };
        for (stage, &busy) in report.per_stage.iter_mut().zip(busy_s) {
            stage.busy_ms = per_step(busy);
            stage.idle_ms = per_step((step_s - busy).max(0.0));
        }
        let capacity = step_s * report.stages as f64;
        report.measured_bubble =
            if capacity > 0.0 { 1.0 - busy_s.iter().sum::<f64>() / capacity } else { f64::NAN };
        report
    }
}

fn out_of_step(k: usize) -> TrainError {
    TrainError::Backend(format!("pipeline stage {k} is out of step"))
}
