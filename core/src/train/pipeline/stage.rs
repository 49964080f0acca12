//! One pipeline stage's thread: its part of the network, its optimizer and
//! its links to the stages either side. A step is GPipe's: every
//! micro-batch's forward pass as its input arrives, then the backward
//! passes in reverse order as their gradients arrive, gradients accumulated,
//! one optimizer step. A micro-batch that re-materialises runs forward
//! without a graph, keeping only its input, and again with one just before
//! its backward pass.

use super::super::task::{Inputs, Scored, Task, Truth};
use crate::config::{Checkpoint, TrainPlan};
use crate::data::Batch;
use crate::model::{Carried, GraphNet, NormStats};
use burn::module::{AutodiffModule, Module};
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Int, Tensor};
use std::sync::mpsc::{Receiver, Sender};
use std::time::Instant;

type Inner<B> = <B as AutodiffBackend>::InnerBackend;

pub(super) enum Order {
    /// One global batch in `count` micro-batches (handed to the first and
    /// last stage; the others get none) at learning rate `lr`.
    Step {
        micro: Vec<Batch>,
        count: usize,
        lr: f64,
    },
    Model,
}

/// The last stage's figures of a step, over all its micro-batches.
pub(super) struct Scores<B: AutodiffBackend> {
    /// The global batch's mean loss.
    pub loss: Tensor<Inner<B>, 1>,
    pub correct: Tensor<Inner<B>, 1, Int>,
    pub total: usize,
    pub ranked: Vec<(Tensor<Inner<B>, 2>, Vec<f32>)>,
}

pub(super) enum Report<B: AutodiffBackend> {
    Ready,
    Stepped {
        /// Seconds computing: the step's time less its waits on the
        /// neighbours (the device is synchronised before each hand-over).
        busy_s: f64,
        /// The last stage's.
        scores: Option<Scores<B>>,
    },
    Model(GraphNet<Inner<B>>),
    Failed(String),
}

/// The channels to the neighbouring stages.
pub(super) struct Links<B: AutodiffBackend> {
    pub from_previous: Option<Receiver<Carried<Inner<B>>>>,
    pub to_next: Option<Sender<Carried<Inner<B>>>>,
    pub grads_from_next: Option<Receiver<Carried<Inner<B>>>>,
    pub grads_to_previous: Option<Sender<Carried<Inner<B>>>>,
}

/// What a stage is and trains with.
pub(super) struct StageSetup<B: AutodiffBackend> {
    pub net: GraphNet<B>,
    pub device: B::Device,
    pub task: Task,
    pub checkpoint: Checkpoint,
    pub links: Links<B>,
}

/// A stage's loop: take orders until the driver hangs up.
pub(super) fn serve<B: AutodiffBackend>(
    setup: StageSetup<B>,
    plan: &TrainPlan,
    orders: Receiver<Order>,
    reports: Sender<Report<B>>,
) -> Result<(), String> {
    if reports.send(Report::Ready).is_err() {
        return Ok(());
    }
    let StageSetup { mut net, device, task, checkpoint, links } = setup;
    let mut stage = Stage { device, task, checkpoint, links, inputs: Inputs::default(), waited_s: 0.0 };
    let mut optim = crate::train::optim::Sgd::<B>::new(plan);
    while let Ok(order) = orders.recv() {
        let report = match order {
            Order::Step { micro, count, lr } => {
                let started = Instant::now();
                stage.waited_s = 0.0;
                let Passed { net: trained, grads, scores } = stage.step(net, micro, count)?;
                net = optim.step(lr, trained, grads);
                stage.sync()?;
                Report::Stepped { busy_s: started.elapsed().as_secs_f64() - stage.waited_s, scores }
            }
            Order::Model => Report::Model(net.valid()),
        };
        if reports.send(report).is_err() {
            break;
        }
    }
    Ok(())
}

/// A stage after a step's passes: its network (running statistics moved),
/// the accumulated gradients and, on the last stage, the scores.
struct Passed<B: AutodiffBackend> {
    net: GraphNet<B>,
    grads: GradientsParams,
    scores: Option<Scores<B>>,
}

/// A micro-batch between its forward and backward pass.
enum Kept<B: AutodiffBackend> {
    /// Its graph: the stage's input leaves and its output, computed by a
    /// fork of the stage's network, whose parameters are leaves of this
    /// graph alone.
    Graph { net: GraphNet<B>, input: Carried<B>, output: Carried<B> },
    /// Its input only; the forward pass runs again before the backward.
    Input(Carried<Inner<B>>),
}

/// One step's micro-batches between the passes.
struct Flight<B: AutodiffBackend> {
    kept: Vec<Kept<B>>,
    /// The last stage's targets and scores, per micro-batch.
    truths: Vec<Truth<Inner<B>>>,
    scored: Vec<Scored<Inner<B>>>,
}

struct Stage<B: AutodiffBackend> {
    device: B::Device,
    task: Task,
    checkpoint: Checkpoint,
    links: Links<B>,
    inputs: Inputs<B>,
    /// Seconds of this step spent waiting on a neighbour.
    waited_s: f64,
}

impl<B: AutodiffBackend> Stage<B> {
    fn sync(&self) -> Result<(), String> {
        B::sync(&self.device).map_err(|e| format!("device synchronisation failed: {e:?}"))
    }

    fn first(&self) -> bool {
        self.links.from_previous.is_none()
    }

    fn last(&self) -> bool {
        self.links.to_next.is_none()
    }

    /// One step's passes: the network (its running statistics moved), the
    /// accumulated gradients and, on the last stage, the scores.
    fn step(&mut self, net: GraphNet<B>, micro: Vec<Batch>, count: usize) -> Result<Passed<B>, String> {
        let mut flight = Flight { kept: Vec::with_capacity(count), truths: Vec::new(), scored: Vec::new() };
        if self.last() {
            for batch in &micro {
                flight.truths.push(self.task.truth(batch.clone(), &self.device).map_err(|e| e.to_string())?);
            }
        }
        let net = self.forward(net, micro, count, &mut flight)?;
        let grads = self.backward(&net, &mut flight)?;
        Ok(Passed { net, grads, scores: self.last().then(|| scores::<B>(flight.scored)) })
    }

    /// Every micro-batch's forward pass, handed on as it finishes.
    fn forward(
        &mut self,
        mut net: GraphNet<B>,
        micro: Vec<Batch>,
        count: usize,
        flight: &mut Flight<B>,
    ) -> Result<GraphNet<B>, String> {
        let mut micro = micro.into_iter();
        // The network without autodiff, for the passes that keep no graph.
        let mut graphless: Option<GraphNet<Inner<B>>> = None;
        for m in 0..count {
            let input = if self.first() {
                let batch = micro.next().ok_or("fewer micro-batches than the step has")?;
                let uploaded =
                    self.task.upload(batch, &mut self.inputs, &self.device).map_err(|e| e.to_string())?;
                let (x, tokens, _) = uploaded.into_parts();
                Carried::inputs(x.inner(), tokens.map(Tensor::inner))
            } else {
                wait(self.links.from_previous.as_ref(), &mut self.waited_s, "previous")?
                    .to_device(&self.device)
            };
            let output = if self.checkpoint.recomputes(m, count) {
                let stage = graphless.get_or_insert_with(|| net.valid());
                let output = stage.forward_stage(input.clone(), NormStats::Batch);
                flight.kept.push(Kept::Input(input));
                output
            } else {
                if let Some(stage) = graphless.take() {
                    net = adopt_running_stats(net, &stage);
                }
                // Micro-batch graphs that shared parameter leaves would
                // merge into one, which burn's autodiff does not keep
                // sound across several backward passes.
                let own = net.clone().fork(&self.device);
                let leaves = Carried::<B>::leaves(input, !self.first());
                let output = own.forward_stage(leaves.clone(), NormStats::ByBackend);
                net = net.with_running_stats(own.running_stats());
                let handed = output.inner();
                flight.kept.push(Kept::Graph { net: own, input: leaves, output });
                handed
            };
            if self.last() {
                let truth = flight.truths.get(m).ok_or("more micro-batches than targets")?.clone();
                flight.scored.push(self.task.loss_of(output.into_output(), truth));
            } else if let Some(next) = &self.links.to_next {
                self.sync()?;
                next.send(output).map_err(|_| "the next stage stopped".to_string())?;
            }
        }
        Ok(match graphless {
            Some(stage) => adopt_running_stats(net, &stage),
            None => net,
        })
    }

    /// Every micro-batch's backward pass, last first, each input's gradient
    /// handed back as it finishes; the parameters' gradients summed.
    fn backward(&mut self, net: &GraphNet<B>, flight: &mut Flight<B>) -> Result<GradientsParams, String> {
        let mut accumulator = GradientsAccumulator::<GraphNet<B>>::new();
        let total: usize = flight.scored.iter().map(|s| s.total).sum();
        while let Some(kept) = flight.kept.pop() {
            let m = flight.kept.len();
            let (own, input, output) = match kept {
                Kept::Graph { net, input, output } => (Some(net), input, output),
                Kept::Input(input) => {
                    let leaves = Carried::<B>::leaves(input, !self.first());
                    let output = net.forward_stage(leaves.clone(), NormStats::BatchOnly);
                    (None, leaves, output)
                }
            };
            let computed_by = own.as_ref().unwrap_or(net);
            let root = if self.last() {
                // Each micro-batch's mean loss weighted by its share of the batch.
                let weight = flight.scored[m].total as f64 / total.max(1) as f64;
                let truth = flight.truths[m].lift::<B>();
                Some(self.task.loss_of(output.into_output(), truth).loss.mul_scalar(weight))
            } else {
                let grads = wait(self.links.grads_from_next.as_ref(), &mut self.waited_s, "next")?;
                output.dot(grads.to_device(&self.device))
            };
            let mut grads = root.map(|r| r.backward());
            if let Some(previous) = &self.links.grads_to_previous {
                let input_grads = input.grads(grads.as_mut());
                self.sync()?;
                previous.send(input_grads).map_err(|_| "the previous stage stopped".to_string())?;
            }
            if let Some(grads) = grads {
                accumulator.accumulate(computed_by, GradientsParams::from_grads(grads, computed_by));
            }
        }
        Ok(accumulator.grads())
    }
}

/// A neighbour's next message on `from`, the wait added to `waited_s`.
fn wait<T>(from: Option<&Receiver<T>>, waited_s: &mut f64, who: &str) -> Result<T, String> {
    let t = Instant::now();
    let received = from.and_then(|r| r.recv().ok());
    *waited_s += t.elapsed().as_secs_f64();
    received.ok_or_else(|| format!("the {who} stage stopped"))
}

/// `net` with the batch-norm running statistics that `graphless` moved.
fn adopt_running_stats<B: AutodiffBackend>(net: GraphNet<B>, graphless: &GraphNet<Inner<B>>) -> GraphNet<B> {
    let stats = graphless.running_stats();
    if stats.is_empty() {
        return net;
    }
    net.with_running_stats(stats.into_iter().map(Tensor::from_inner).collect())
}

/// A step's scores over its micro-batches: losses weighted by each one's share.
fn scores<B: AutodiffBackend>(scored: Vec<Scored<Inner<B>>>) -> Scores<B> {
    let total: usize = scored.iter().map(|s| s.total).sum();
    let mut out: Option<Scores<B>> = None;
    for s in scored {
        let loss = s.loss.mul_scalar(s.total as f64 / total.max(1) as f64);
        out = Some(match out {
            None => {
                Scores { loss, correct: s.correct, total: s.total, ranked: s.ranked.into_iter().collect() }
            }
            Some(o) => Scores {
                loss: o.loss + loss,
                correct: o.correct + s.correct,
                total: o.total + s.total,
                ranked: o.ranked.into_iter().chain(s.ranked).collect(),
            },
        });
    }
    out.unwrap_or_else(|| Scores {
        loss: Tensor::zeros([1], &Default::default()),
        correct: Tensor::zeros([1], &Default::default()),
        total: 0,
        ranked: Vec::new(),
    })
}
