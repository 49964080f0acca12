//! The model being trained, as one replica on the step loop's thread or as
//! data-parallel replicas, one per device, each on its own thread. Replicas
//! start as clones of one materialised model, take equal shards of every
//! global batch, average their gradients with burn-collective's all-reduce
//! and apply the same optimizer step, so they stay identical.
//!
//! Batch-norm running statistics are kept per replica, each from its own
//! shards (a clone's would otherwise be shared across threads, which burn's
//! autodiff graphs do not survive), and averaged over the replicas for every
//! evaluation.

use super::task::Task;
use super::TrainError;
use crate::config::{AllReduce, TrainPlan};
use crate::data::Batch;
use crate::model::GraphNet;
use burn::collective::{self, AllReduceStrategy, CollectiveConfig, PeerId, ReduceOperation};
use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Instant;

/// What one step gave, on the inner backend: mean loss, correct count of
/// `total`, multi-label probabilities and targets, and the slowest
/// replica's all-reduce time.
pub(crate) struct Stepped<B: Backend> {
    pub losses: Vec<Tensor<B, 1>>,
    pub correct: Vec<Tensor<B, 1, Int>>,
    pub total: usize,
    pub ranked: Vec<(Tensor<B, 2>, Vec<f32>)>,
    pub all_reduce_s: f64,
}

fn sgd<B: AutodiffBackend>(plan: &TrainPlan) -> impl Optimizer<GraphNet<B>, B> {
    SgdConfig::new()
        .with_momentum(Some(MomentumConfig {
            momentum: plan.momentum,
            dampening: 0.0,
            nesterov: plan.nesterov,
        }))
        .with_weight_decay(
            (plan.weight_decay > 0.0).then(|| WeightDecayConfig::new(plan.weight_decay as f32)),
        )
        .init()
}

/// Run every parameter's lazy initialiser now, so that clones share the
/// values instead of each drawing its own.
fn materialise<B: Backend>(model: &GraphNet<B>) {
    struct Touch;
    impl<B: Backend> ModuleVisitor<B> for Touch {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let _ = param.val();
        }
    }
    model.visit(&mut Touch);
}

/// Bytes of all trainable parameters: what each replica all-reduces per step.
pub(crate) fn gradient_bytes<B: Backend>(model: &GraphNet<B>) -> usize {
    struct Count(usize);
    impl<B: Backend> ModuleVisitor<B> for Count {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if param.is_require_grad() {
                self.0 += param.shape().num_elements() * std::mem::size_of::<f32>();
            }
        }
    }
    let mut count = Count(0);
    model.visit(&mut count);
    count.0
}

enum Order {
    Step { shard: Batch, lr: f64 },
    Model,
}

enum Report<B: AutodiffBackend> {
    Stepped {
        loss: Tensor<B::InnerBackend, 1>,
        correct: Tensor<B::InnerBackend, 1, Int>,
        total: usize,
        ranked: Option<(Tensor<B::InnerBackend, 2>, Vec<f32>)>,
        all_reduce_s: f64,
    },
    Model(GraphNet<B::InnerBackend>),
    Failed(String),
}

pub(crate) struct Worker<B: AutodiffBackend> {
    /// Closed (taken) to stop the replica.
    orders: Option<Sender<Order>>,
    reports: Receiver<Report<B>>,
}

impl<B: AutodiffBackend> Worker<B> {
    fn send(&self, w: usize, order: Order) -> Result<(), TrainError> {
        self.orders.as_ref().ok_or_else(|| gone(w))?.send(order).map_err(|_| gone(w))
    }
}

/// How long a stopping replica may take to leave the collective.
const LEAVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl<B: AutodiffBackend, O: Optimizer<GraphNet<B>, B>> Drop for Replicas<B, O> {
    /// Stop every replica, then wait (boundedly) until each has left the
    /// collective, so that the process can start another set.
    fn drop(&mut self) {
        if let Replicas::Parallel { workers } = self {
            for worker in workers.iter_mut() {
                worker.orders.take();
            }
            for worker in workers.iter() {
                while worker.reports.recv_timeout(LEAVE_TIMEOUT).is_ok() {}
            }
        }
    }
}

/// The model as trained: one replica here, or one per device on worker threads.
pub(crate) enum Replicas<B: AutodiffBackend, O: Optimizer<GraphNet<B>, B>> {
    Local { model: GraphNet<B>, optim: O, device: B::Device, task: Task },
    Parallel { workers: Vec<Worker<B>> },
}

/// Start the replicas of `model` on `devices` (one: no threads, no collective).
pub(crate) fn start<B: AutodiffBackend>(
    model: GraphNet<B>,
    devices: Vec<B::Device>,
    plan: &TrainPlan,
    task: Task,
) -> Result<Replicas<B, impl Optimizer<GraphNet<B>, B>>, TrainError> {
    if devices.len() <= 1 {
        let device = devices.into_iter().next().unwrap_or_default();
        return Ok(Replicas::Local { model, optim: sgd::<B>(plan), device, task });
    }
    materialise(&model);
    let n = devices.len();
    let strategy = match plan.parallel.strategy {
        AllReduce::Ring => AllReduceStrategy::Ring,
        AllReduce::Tree => AllReduceStrategy::Tree(2),
        AllReduce::Centralized => AllReduceStrategy::Centralized,
    };
    let config = CollectiveConfig::default().with_num_devices(n).with_local_all_reduce_strategy(strategy);
    let mut workers = Vec::with_capacity(n);
    for (w, device) in devices.into_iter().enumerate() {
        let (orders, their_orders) = channel();
        let (their_reports, reports) = channel();
        // A fork has its own autodiff leaves: replicas that shared them
        // would merge their graphs across threads.
        let replica = model.clone().with_own_running_stats().fork(&device);
        let config = config.clone();
        let plan = plan.clone();
        let threads = plan.parallel.threads_per_device;
        std::thread::Builder::new()
            .name(format!("benchkit-replica-{w}"))
            .spawn(move || {
                let work = move || {
                    let failed = their_reports.clone();
                    if let Err(message) =
                        serve::<B>(w, replica, device, config, &plan, task, their_orders, their_reports)
                    {
                        let _ = failed.send(Report::Failed(message));
                    }
                };
                match threads.map(|t| rayon::ThreadPoolBuilder::new().num_threads(t).build()) {
                    Some(Ok(pool)) => pool.install(work),
                    _ => work(),
                }
            })
            .map_err(|e| TrainError::Backend(format!("cannot start the thread of replica {w}: {e}")))?;
        workers.push(Worker { orders: Some(orders), reports });
    }
    Ok(Replicas::Parallel { workers })
}

/// A replica's loop: register with the collective, then take orders until
/// the step loop hangs up.
#[allow(clippy::too_many_arguments)]
fn serve<B: AutodiffBackend>(
    w: usize,
    mut model: GraphNet<B>,
    device: B::Device,
    config: CollectiveConfig,
    plan: &TrainPlan,
    task: Task,
    orders: Receiver<Order>,
    reports: Sender<Report<B>>,
) -> Result<(), String> {
    let id = PeerId::from(w as u32);
    collective::register::<B::InnerBackend>(id, device.clone(), config)
        .map_err(|e| format!("replica {w} could not join the all-reduce: {e:?}"))?;
    let mut optim = sgd::<B>(plan);
    while let Ok(order) = orders.recv() {
        match order {
            Order::Step { shard, lr } => {
                let s = task.score(&model, shard, &device);
                let grads = GradientsParams::from_grads(s.loss.backward(), &model);
                let t0 = Instant::now();
                let grads = grads
                    .all_reduce::<B::InnerBackend>(id, ReduceOperation::Mean)
                    .map_err(|e| format!("replica {w}: the gradient all-reduce failed: {e:?}"))?;
                let all_reduce_s = t0.elapsed().as_secs_f64();
                model = optim.step(lr, model, grads);
                let report = Report::Stepped {
                    loss: s.loss.inner(),
                    correct: s.correct.inner(),
                    total: s.total,
                    ranked: s.ranked.map(|(p, t)| (p.inner(), t)),
                    all_reduce_s,
                };
                if reports.send(report).is_err() {
                    break;
                }
            }
            Order::Model => {
                if reports.send(Report::Model(model.valid())).is_err() {
                    break;
                }
            }
        }
    }
    let _ = collective::finish_collective::<B::InnerBackend>(id);
    Ok(())
}

impl<B: AutodiffBackend, O: Optimizer<GraphNet<B>, B>> Replicas<B, O> {
    /// One training step on `batch` (the global batch) at learning rate `lr`.
    pub fn step(&mut self, batch: Batch, lr: f64) -> Result<Stepped<B::InnerBackend>, TrainError> {
        match self {
            Replicas::Local { model, optim, device, task } => {
                let s = task.score(model, batch, device);
                let grads = GradientsParams::from_grads(s.loss.backward(), &*model);
                *model = optim.step(lr, model.clone(), grads);
                Ok(Stepped {
                    losses: vec![s.loss.inner()],
                    correct: vec![s.correct.inner()],
                    total: s.total,
                    ranked: s.ranked.map(|(p, t)| (p.inner(), t)).into_iter().collect(),
                    all_reduce_s: 0.0,
                })
            }
            Replicas::Parallel { workers } => {
                let shards = batch.split(workers.len());
                if shards.iter().any(|s| s.count == 0) {
                    return Err(TrainError::Backend(format!(
                        "a batch of {} images cannot give each of {} replicas at least one",
                        shards.iter().map(|s| s.count).sum::<usize>(),
                        workers.len()
                    )));
                }
                for (w, (worker, shard)) in workers.iter().zip(shards).enumerate() {
                    worker.send(w, Order::Step { shard, lr })?;
                }
                let mut out = Stepped {
                    losses: Vec::new(),
                    correct: Vec::new(),
                    total: 0,
                    ranked: Vec::new(),
                    all_reduce_s: 0.0,
                };
                for (w, worker) in workers.iter().enumerate() {
                    match worker.reports.recv().map_err(|_| gone(w))? {
                        Report::Stepped { loss, correct, total, ranked, all_reduce_s } => {
                            out.losses.push(loss);
                            out.correct.push(correct);
                            out.total += total;
                            out.ranked.extend(ranked);
                            out.all_reduce_s = out.all_reduce_s.max(all_reduce_s);
                        }
                        Report::Failed(message) => return Err(TrainError::Backend(message)),
                        Report::Model(_) => {
                            return Err(TrainError::Backend(format!("replica {w} is out of step")))
                        }
                    }
                }
                Ok(out)
            }
        }
    }

    /// The model to evaluate, without autodiff: the first replica's
    /// parameters with the replicas' mean batch-norm running statistics.
    pub fn model(&mut self) -> Result<GraphNet<B::InnerBackend>, TrainError> {
        let mut models = self.models()?;
        if models.len() == 1 {
            return Ok(models.remove(0));
        }
        let n = models.len() as f64;
        let mut stats: Vec<Tensor<B::InnerBackend, 1>> = models[0].running_stats();
        for other in &models[1..] {
            stats = stats.into_iter().zip(other.running_stats()).map(|(a, b)| a + b).collect();
        }
        let mean = stats.into_iter().map(|s| s.div_scalar(n)).collect();
        Ok(models.remove(0).with_running_stats(mean))
    }

    /// Every replica's model without autodiff, for checks that they agree.
    pub fn models(&mut self) -> Result<Vec<GraphNet<B::InnerBackend>>, TrainError> {
        match self {
            Replicas::Local { model, .. } => Ok(vec![model.valid()]),
            Replicas::Parallel { workers } => {
                for (w, worker) in workers.iter().enumerate() {
                    worker.send(w, Order::Model)?;
                }
                let mut models = Vec::with_capacity(workers.len());
                for (w, worker) in workers.iter().enumerate() {
                    match worker.reports.recv().map_err(|_| gone(w))? {
                        Report::Model(model) => models.push(model),
                        Report::Failed(message) => return Err(TrainError::Backend(message)),
                        Report::Stepped { .. } => {
                            return Err(TrainError::Backend(format!("replica {w} is out of step")))
                        }
                    }
                }
                Ok(models)
            }
        }
    }
}

fn gone(w: usize) -> TrainError {
    TrainError::Backend(format!("replica {w} stopped unexpectedly (its thread ended)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Parallel;
    use crate::model::Graph;
    use crate::plugin::{Attr, AttrValue, ImageShape, ModelGraph, WitNode as Node};
    use burn::backend::flex::FlexDevice;
    use burn::backend::{Autodiff, Flex};

    type B = Autodiff<Flex>;

    /// burn-collective has one server per process: one test at a time uses it.
    static COLLECTIVE: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn node(op: &str, inputs: &[u32], attrs: &[(&str, i64)]) -> Node {
        Node {
            name: op.into(),
            op: op.into(),
            inputs: inputs.to_vec(),
            attrs: attrs
                .iter()
                .map(|(n, v)| Attr { name: n.to_string(), value: AttrValue::Int(*v) })
                .collect(),
        }
    }

    /// conv → (batch norm) → relu → linear on 1×6×6 images, 3 classes.
    fn graph(batch_norm: bool) -> Graph {
        let mut nodes = vec![
            node("input", &[], &[("index", 0)]),
            node("conv2d", &[0], &[("in_channels", 1), ("out_channels", 4), ("kernel", 3), ("padding", 1)]),
        ];
        if batch_norm {
            nodes.push(node("batch_norm", &[1], &[("channels", 4)]));
        }
        let last = nodes.len() as u32 - 1;
        nodes.push(node("relu", &[last], &[]));
        nodes.push(node("flatten", &[last + 1], &[]));
        nodes.push(node("linear", &[last + 2], &[("in_features", 144), ("out_features", 3)]));
        let output = nodes.len() as u32 - 1;
        let input = ImageShape { channels: 1, height: 6, width: 6 };
        Graph::from_wit(&ModelGraph { input, nodes, output, subgraphs: vec![] }, None).unwrap()
    }

    fn model(graph: &Graph) -> GraphNet<B> {
        B::seed(&FlexDevice, 11);
        let model = GraphNet::new(graph, &FlexDevice);
        materialise(&model);
        model
    }

    fn batch(count: usize, step: usize) -> Batch {
        let images = (0..count * 36).map(|i| (((i * 31 + step * 17) % 97) as f32 / 48.0) - 1.0).collect();
        Batch {
            count,
            shape: ImageShape { channels: 1, height: 6, width: 6 },
            images,
            labels: (0..count as i64).map(|i| (i + step as i64) % 3).collect(),
            tokens: Vec::new(),
            token_len: 0,
            targets: Vec::new(),
            targets_width: 0,
        }
    }

    fn values(model: &GraphNet<Flex>) -> Vec<f32> {
        struct Gather(Vec<f32>);
        impl ModuleVisitor<Flex> for Gather {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Flex, D>>) {
                self.0.extend(param.val().into_data().convert::<f32>().to_vec::<f32>().unwrap_or_default());
            }
        }
        let mut all = Gather(Vec::new());
        model.visit(&mut all);
        all.0
    }

    fn plan(devices: usize) -> TrainPlan {
        let mut plan: TrainPlan = serde_json::from_value(serde_json::json!({
            "epochs": 1, "batch_size": 8, "eval_batch_size": 8, "drop_last": true, "lr": 0.1,
            "lr_schedule": "constant", "momentum": 0.9, "nesterov": false, "weight_decay": 0.0005,
            "warmup_steps": 0, "max_steps_per_epoch": null, "target_accuracy": null
        }))
        .unwrap();
        plan.parallel = Parallel { devices, ..Parallel::default() };
        plan
    }

    /// Replicas that start apart (lazy initialisers draw anew for each
    /// clone) or miss an all-reduce would differ after a few steps. Each
    /// keeps its own batch-norm statistics; evaluation gets their mean.
    #[test]
    fn replicas_stay_identical_with_batch_norm() {
        let _one = COLLECTIVE.lock().unwrap_or_else(|e| e.into_inner());
        let graph = graph(true);
        let mut pair = start(model(&graph), vec![FlexDevice; 2], &plan(2), Task::Classify).unwrap();
        let mut losses = Vec::new();
        for step in 0..4 {
            let s = pair.step(batch(8, step), 0.1).unwrap();
            assert_eq!((s.losses.len(), s.total), (2, 8));
            losses.push(s.losses.iter().map(|l| l.clone().into_scalar()).sum::<f32>() / 2.0);
        }
        let models = pair.models().unwrap();
        let stats: Vec<Vec<Vec<f32>>> = models
            .iter()
            .map(|m| m.running_stats().into_iter().map(|t| t.into_data().to_vec::<f32>().unwrap()).collect())
            .collect();
        assert_eq!(stats[0].len(), 2, "one batch norm: mean and variance");
        assert_ne!(stats[0][0], stats[1][0], "each replica's running mean follows its own shards");
        let evaluated = pair.model().unwrap();
        let mean: Vec<f32> = evaluated.running_stats()[0].clone().into_data().to_vec().unwrap();
        for (k, m) in mean.iter().enumerate() {
            assert!((m - (stats[0][0][k] + stats[1][0][k]) / 2.0).abs() < 1e-6, "{mean:?} vs {stats:?}");
        }
        // With the statistics set alike, the replicas are the same network.
        let same = |m: &GraphNet<Flex>| values(&m.clone().with_running_stats(evaluated.running_stats()));
        let (a, b) = (same(&models[0]), same(&models[1]));
        assert!(a.len() > 4 * 9 + 144 * 3, "parameters and running statistics: {}", a.len());
        assert_eq!(a, b, "replicas agree after 4 steps");
        assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
        let x: Tensor<Flex, 4> = Tensor::ones([2, 1, 6, 6], &FlexDevice);
        let y = |m: &GraphNet<Flex>| {
            m.clone()
                .with_running_stats(evaluated.running_stats())
                .forward(x.clone())
                .into_data()
                .to_vec::<f32>()
        };
        assert_eq!(y(&models[0]).unwrap(), y(&models[1]).unwrap());
    }

    /// Without batch norm, two replicas averaging the gradients of their
    /// half-batch mean losses take the same steps as one device on the
    /// whole batch.
    #[test]
    fn two_replicas_train_as_one_device_on_the_whole_batch() {
        let _one = COLLECTIVE.lock().unwrap_or_else(|e| e.into_inner());
        let graph = graph(false);
        let mut one = start(model(&graph), vec![FlexDevice], &plan(1), Task::Classify).unwrap();
        let mut two = start(model(&graph), vec![FlexDevice; 2], &plan(2), Task::Classify).unwrap();
        for step in 0..3 {
            one.step(batch(8, step), 0.1).unwrap();
            two.step(batch(8, step), 0.1).unwrap();
        }
        let (a, b) = (values(&one.model().unwrap()), values(&two.model().unwrap()));
        let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
        assert!(worst < 1e-5, "largest parameter difference {worst}");
        let moved =
            values(&model(&graph).valid()).iter().zip(&a).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
        assert!(moved > 1e-3, "the steps changed the parameters: {moved}");
    }

    #[test]
    fn batches_split_into_near_equal_shards_in_order() {
        let mut b = batch(5, 0);
        b.targets = (0..10).map(|v| v as f32).collect();
        b.targets_width = 2;
        let parts = b.clone().split(2);
        assert_eq!(parts.iter().map(|p| p.count).collect::<Vec<_>>(), [3, 2]);
        assert_eq!(parts[1].labels, b.labels[3..]);
        assert_eq!(parts[1].images, b.images[3 * 36..]);
        assert_eq!(parts[0].targets, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(parts[1].targets_width, 2);
        assert_eq!(b.split(7).iter().filter(|p| p.count == 0).count(), 2);
    }
}
