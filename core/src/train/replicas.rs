//! The model being trained, as one replica on the step loop's thread or as
//! data-parallel replicas, one per device, each on its own thread. Replicas
//! start as clones of one materialised model, take equal shards of every
//! global batch, average their gradients with burn-collective's all-reduce
//! (all of a step's gradients fused into one flat tensor, so one call) and
//! apply the same optimizer step, so they stay identical.
//!
//! Several processes (nodes) train one cell together through
//! burn-collective's global orchestrator, which rank 0 serves: every
//! replica of every process is one peer of the all-reduce. Parameters get
//! ids in module order and start from rank 0's values, so every process
//! holds the same network whatever its own initialisation drew.
//!
//! Batch-norm running statistics are kept per replica, each from its own
//! shards (a clone's would otherwise be shared across threads, which burn's
//! autodiff graphs do not survive), and averaged over all replicas of all
//! processes for every evaluation.

use super::task::Task;
use super::TrainError;
use crate::config::{AllReduce, TrainPlan};
use crate::data::Batch;
use crate::model::GraphNet;
use burn::collective::{self, AllReduceStrategy, CollectiveConfig, CollectiveError, PeerId, ReduceOperation};
use burn::module::{AutodiffModule, Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor, TensorData, TensorPrimitive};
use serde::{Deserialize, Serialize};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// This process's place among the processes that train one cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct World {
    pub rank: usize,
    pub processes: usize,
    /// `host:port` of the global orchestrator (rank 0 serves it).
    pub coordinator: String,
    /// This process's tensor data service port.
    pub data_port: u16,
    /// The host other processes reach this one at.
    pub host: String,
    /// How long to wait for peers before giving up.
    pub timeout_s: f64,
}

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

/// Number the parameters in module order. burn draws random ids; numbered,
/// a parameter has the same id in every replica of every process, as the
/// fused all-reduce has the same place for it.
fn number_params<B: Backend>(model: GraphNet<B>) -> GraphNet<B> {
    struct Number(u64);
    impl<B: Backend> ModuleMapper<B> for Number {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (_, tensor, mapper) = param.consume();
            self.0 += 1;
            Param::from_mapped_value(ParamId::from(self.0), tensor, mapper)
        }
    }
    model.map(&mut Number(0))
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

/// A 64-bit FNV-1a hash of every trainable parameter's bits, as four
/// 16-bit parts (exact in an f32, so it survives an all-reduce). Batch-norm
/// running statistics, which each replica keeps, are left out. A parameter
/// that cannot be read back is an error, never an empty (and so agreeing) hash.
pub(crate) fn fingerprint<B: Backend>(model: &GraphNet<B>) -> Result<[f32; 4], String> {
    struct Hash(u64, Option<String>);
    impl<B: Backend> ModuleVisitor<B> for Hash {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if !param.is_require_grad() || self.1.is_some() {
                return;
            }
            match param.val().into_data().convert::<f32>().to_vec::<f32>() {
                Ok(values) => {
                    for v in values {
                        for byte in v.to_bits().to_le_bytes() {
                            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
                        }
                    }
                }
                Err(e) => self.1 = Some(format!("cannot read a parameter back to fingerprint it: {e:?}")),
            }
        }
    }
    let mut hash = Hash(0xcbf2_9ce4_8422_2325, None);
    model.visit(&mut hash);
    if let Some(e) = hash.1 {
        return Err(e);
    }
    let h = hash.0;
    Ok([0, 16, 32, 48].map(|shift| ((h >> shift) & 0xffff) as f32))
}

/// All-reduce `parts` as one flat tensor: a single collective call, and so
/// a single barrier between processes, however many parts there are. The
/// flat tensor has at least one element per process: the ring across
/// processes cuts it into one slice each.
fn reduce_fused<B: Backend>(
    id: PeerId,
    parts: Vec<Tensor<B, 1>>,
    op: ReduceOperation,
    processes: usize,
) -> Result<Vec<Tensor<B, 1>>, String> {
    let Some(device) = parts.first().map(Tensor::device) else {
        return Ok(parts);
    };
    let lens: Vec<usize> = parts.iter().map(|t| t.dims()[0]).collect();
    let total: usize = lens.iter().sum();
    let mut parts = parts;
    if total < processes {
        parts.push(Tensor::zeros([processes - total], &device));
    }
    let flat = Tensor::cat(parts, 0).into_primitive().tensor();
    let flat = collective::all_reduce::<B>(id, flat, op).map_err(|e| match e {
        CollectiveError::LocalServerMissing if processes > 1 => format!(
            "the all-reduce across {processes} processes broke off: another process died, or a peer became unreachable"
        ),
        e => format!("the all-reduce failed: {e:?}"),
    })?;
    let flat = Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(flat));
    let mut at = 0;
    Ok(lens
        .into_iter()
        .map(|len| {
            at += len;
            flat.clone().narrow(0, at - len, len)
        })
        .collect())
}

fn flat<B: Backend, const D: usize>(tensor: Tensor<B, D>) -> Tensor<B, 1> {
    let n = tensor.shape().num_elements();
    tensor.reshape([n])
}

/// Average the gradients of every replica of every process, fused into one all-reduce.
fn reduce_gradients<B: AutodiffBackend>(
    id: PeerId,
    model: &GraphNet<B>,
    mut grads: GradientsParams,
    processes: usize,
) -> Result<GradientsParams, String> {
    struct Take<'a, B: AutodiffBackend> {
        grads: &'a mut GradientsParams,
        ids: Vec<ParamId>,
        parts: Vec<Tensor<B::InnerBackend, 1>>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Take<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if let Some(grad) = self.grads.remove::<B::InnerBackend, D>(param.id) {
                self.ids.push(param.id);
                self.parts.push(flat(grad));
            }
        }
    }
    struct Put<'a, B: AutodiffBackend> {
        grads: &'a mut GradientsParams,
        ids: std::iter::Peekable<std::vec::IntoIter<ParamId>>,
        parts: std::vec::IntoIter<Tensor<B::InnerBackend, 1>>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Put<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if self.ids.next_if_eq(&param.id).is_some() {
                if let Some(part) = self.parts.next() {
                    let grad: Tensor<B::InnerBackend, D> = part.reshape(param.shape());
                    self.grads.register(param.id, grad);
                }
            }
        }
    }
    let mut take = Take::<B> { grads: &mut grads, ids: Vec::new(), parts: Vec::new() };
    model.visit(&mut take);
    let Take { ids, parts, .. } = take;
    let parts = reduce_fused(id, parts, ReduceOperation::Mean, processes)?;
    model.visit(&mut Put::<B> {
        grads: &mut grads,
        ids: ids.into_iter().peekable(),
        parts: parts.into_iter(),
    });
    Ok(grads)
}

/// Replace every parameter with the first peer's: the others send zeros
/// to a sum, which leaves the first peer's values exact.
fn adopt_first<B: AutodiffBackend>(
    id: PeerId,
    first: bool,
    model: GraphNet<B>,
    processes: usize,
) -> Result<GraphNet<B>, String> {
    struct Own<B: AutodiffBackend> {
        first: bool,
        parts: Vec<Tensor<B::InnerBackend, 1>>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Own<B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let inner = param.val().inner();
            self.parts.push(flat(if self.first { inner } else { inner.zeros_like() }));
        }
    }
    struct Adopt<B: AutodiffBackend> {
        parts: std::vec::IntoIter<Tensor<B::InnerBackend, 1>>,
    }
    impl<B: AutodiffBackend> ModuleMapper<B> for Adopt<B> {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (pid, tensor, mapper) = param.consume();
            let Some(part) = self.parts.next() else {
                return Param::from_mapped_value(pid, tensor, mapper);
            };
            let adopted = Tensor::from_inner(part.reshape(tensor.shape()));
            let adopted = if tensor.is_require_grad() { adopted.require_grad() } else { adopted };
            Param::from_mapped_value(pid, adopted, mapper)
        }
    }
    let mut own = Own::<B> { first, parts: Vec::new() };
    model.visit(&mut own);
    let parts = reduce_fused(id, own.parts, ReduceOperation::Sum, processes)?;
    Ok(model.map(&mut Adopt::<B> { parts: parts.into_iter() }))
}

enum Order {
    Step {
        shard: Batch,
        lr: f64,
    },
    Model,
    /// Sum `row` (this process's figures, or none) into a table of one row per peer.
    Gather {
        row: Option<Vec<f32>>,
        width: usize,
    },
}

enum Report<B: AutodiffBackend> {
    Ready,
    Stepped {
        loss: Tensor<B::InnerBackend, 1>,
        correct: Tensor<B::InnerBackend, 1, Int>,
        total: usize,
        ranked: Option<(Tensor<B::InnerBackend, 2>, Vec<f32>)>,
        all_reduce_s: f64,
    },
    Model(GraphNet<B::InnerBackend>),
    Gathered(Vec<f32>),
    Failed(String),
}

pub(crate) struct Worker<B: AutodiffBackend> {
    /// Closed (taken) to stop the replica.
    orders: Option<Sender<Order>>,
    reports: Receiver<Report<B>>,
}

/// How long a stopping replica may take to leave the collective.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(30);

impl<B: AutodiffBackend, O: Optimizer<GraphNet<B>, B>> Drop for Replicas<B, O> {
    /// Stop every replica, then wait (boundedly) until each has left the
    /// collective, so that the process can start another set. Replicas that
    /// failed may be stuck in a collective call: they are left behind.
    fn drop(&mut self) {
        if let Replicas::Parallel { workers, failed, .. } = self {
            for worker in workers.iter_mut() {
                worker.orders.take();
            }
            if !*failed {
                for worker in workers.iter() {
                    while worker.reports.recv_timeout(LEAVE_TIMEOUT).is_ok() {}
                }
            }
        }
    }
}

/// The model as trained: one replica here, or one per device on worker threads.
pub(crate) enum Replicas<B: AutodiffBackend, O: Optimizer<GraphNet<B>, B>> {
    Local {
        model: GraphNet<B>,
        optim: O,
        device: B::Device,
        task: Task,
    },
    Parallel {
        workers: Vec<Worker<B>>,
        world: Option<World>,
        /// Set once a replica failed or stopped answering.
        failed: bool,
    },
}

/// Fail unless `port` is free to listen on.
fn port_free(port: u16, what: &str) -> Result<(), TrainError> {
    std::net::TcpListener::bind(("0.0.0.0", port)).map(drop).map_err(|e| {
        TrainError::Backend(format!(
            "the {what} port {port} is taken ({e}); free it or choose another in [distributed]"
        ))
    })
}

/// Serve burn-collective's global orchestrator on `port` for the life of the process.
fn start_orchestrator(port: u16) -> Result<(), TrainError> {
    port_free(port, "coordinator")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| TrainError::Backend(format!("cannot start the orchestrator's runtime: {e}")))?;
    std::thread::Builder::new()
        .name("benchkit-orchestrator".into())
        .spawn(move || runtime.block_on(burn_collective::start_global_orchestrator(port)))
        .map_err(|e| TrainError::Backend(format!("cannot start the orchestrator: {e}")))?;
    Ok(())
}

/// A websocket address for `host:port`.
fn address(host_port: &str) -> Result<burn_communication::Address, TrainError> {
    let url = if host_port.contains("://") { host_port.to_string() } else { format!("ws://{host_port}") };
    url.parse().map_err(|e| TrainError::Setup(format!("{host_port:?} is not an address: {e}")))
}

/// Start the replicas of `model` on `devices`, joined by the processes of
/// `world` when there is one (a single replica: no threads, no collective).
pub(crate) fn start<B: AutodiffBackend>(
    model: GraphNet<B>,
    devices: Vec<B::Device>,
    plan: &TrainPlan,
    task: Task,
    world: Option<World>,
) -> Result<Replicas<B, impl Optimizer<GraphNet<B>, B>>, TrainError> {
    let world = world.filter(|w| w.processes > 1);
    if devices.len() <= 1 && world.is_none() {
        let device = devices.into_iter().next().unwrap_or_default();
        return Ok(Replicas::Local { model, optim: sgd::<B>(plan), device, task });
    }
    materialise(&model);
    let model = number_params(model);
    let n = devices.len();
    let strategy = match plan.parallel.strategy {
        AllReduce::Ring => AllReduceStrategy::Ring,
        AllReduce::Tree => AllReduceStrategy::Tree(2),
        AllReduce::Centralized => AllReduceStrategy::Centralized,
    };
    let mut config = CollectiveConfig::default().with_num_devices(n).with_local_all_reduce_strategy(strategy);
    if let Some(w) = &world {
        if w.rank == 0 {
            let port = w.coordinator.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).ok_or_else(|| {
                TrainError::Setup(format!("the coordinator {:?} is not host:port", w.coordinator))
            })?;
            start_orchestrator(port)?;
        }
        port_free(w.data_port, "data service")?;
        config = config
            .with_num_nodes(w.processes as u32)
            .with_global_address(address(&w.coordinator)?)
            .with_node_address(address(&format!("{}:{}", w.host, w.data_port))?)
            .with_data_service_port(w.data_port)
            .with_global_all_reduce_strategy(strategy);
    }
    let rank = world.as_ref().map_or(0, |w| w.rank);
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
        let processes = world.as_ref().map_or(1, |w| w.processes);
        let peer = Peer { local: w, global: rank * n + w, processes };
        std::thread::Builder::new()
            .name(format!("benchkit-replica-{w}"))
            .spawn(move || {
                let work = move || {
                    let failed = their_reports.clone();
                    if let Err(message) =
                        serve::<B>(peer, replica, device, config, &plan, task, their_orders, their_reports)
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
    let mut replicas = Replicas::Parallel { workers, world, failed: false };
    replicas.wait_ready()?;
    Ok(replicas)
}

/// A replica's place: its index in this process and among all peers, and
/// how many processes share the collective.
#[derive(Clone, Copy)]
struct Peer {
    local: usize,
    global: usize,
    processes: usize,
}

/// A replica's loop: register with the collective, then take orders until
/// the step loop hangs up.
#[allow(clippy::too_many_arguments)]
fn serve<B: AutodiffBackend>(
    peer: Peer,
    mut model: GraphNet<B>,
    device: B::Device,
    config: CollectiveConfig,
    plan: &TrainPlan,
    task: Task,
    orders: Receiver<Order>,
    reports: Sender<Report<B>>,
) -> Result<(), String> {
    let w = peer.local;
    let id = PeerId::from(peer.global as u32);
    collective::register::<B::InnerBackend>(id, device.clone(), config)
        .map_err(|e| format!("replica {w} could not join the all-reduce: {e:?}"))?;
    if peer.processes > 1 {
        model = adopt_first(id, peer.global == 0, model, peer.processes)
            .map_err(|e| format!("replica {w} could not take rank 0's parameters: {e}"))?;
    }
    if reports.send(Report::Ready).is_err() {
        return Ok(());
    }
    let mut optim = sgd::<B>(plan);
    while let Ok(order) = orders.recv() {
        let report =
            match order {
                Order::Step { shard, lr } => {
                    let s = task.score(&model, shard, &device);
                    let grads = GradientsParams::from_grads(s.loss.backward(), &model);
                    let t0 = Instant::now();
                    let grads = reduce_gradients(id, &model, grads, peer.processes)
                        .map_err(|e| format!("replica {w}: the gradient all-reduce failed: {e}"))?;
                    let all_reduce_s = t0.elapsed().as_secs_f64();
                    model = optim.step(lr, model, grads);
                    Report::Stepped {
                        loss: s.loss.inner(),
                        correct: s.correct.inner(),
                        total: s.total,
                        ranked: s.ranked.map(|(p, t)| (p.inner(), t)),
                        all_reduce_s,
                    }
                }
                Order::Model => {
                    let valid = model.valid();
                    let mean = reduce_fused(id, valid.running_stats(), ReduceOperation::Mean, peer.processes)
                        .map_err(|e| format!("replica {w}: averaging batch-norm statistics: {e}"))?;
                    Report::Model(if mean.is_empty() { valid } else { valid.with_running_stats(mean) })
                }
                Order::Gather { row, width } => {
                    let valid = model.valid();
                    let peers = collective_peers(&valid, id, peer.processes)?;
                    let mut table = vec![0.0f32; peers * (width + 4)];
                    let at = peer.global * (width + 4);
                    if let Some(row) = row {
                        for (k, v) in row.into_iter().take(width).enumerate() {
                            table[at + k] = v;
                        }
                    }
                    let print = fingerprint(&model).map_err(|e| format!("replica {w}: {e}"))?;
                    table[at + width..at + width + 4].copy_from_slice(&print);
                    let device = valid.devices().into_iter().next().unwrap_or_default();
                    let t = Tensor::<B::InnerBackend, 1>::from_data(
                        TensorData::new(table, [peers * (width + 4)]),
                        &device,
                    );
                    let summed = reduce_fused(id, vec![t], ReduceOperation::Sum, peer.processes)
                        .map_err(|e| format!("replica {w}: {e}"))?;
                    Report::Gathered(
                        Tensor::cat(summed, 0).into_data().convert::<f32>().to_vec::<f32>().map_err(|e| {
                            format!("replica {w}: cannot read the gathered figures back: {e:?}")
                        })?,
                    )
                }
            };
        if reports.send(report).is_err() {
            break;
        }
    }
    let _ = collective::finish_collective::<B::InnerBackend>(id);
    Ok(())
}

/// How many peers share the all-reduce: a sum of ones.
fn collective_peers<B: Backend>(model: &GraphNet<B>, id: PeerId, processes: usize) -> Result<usize, String> {
    let device = model.devices().into_iter().next().unwrap_or_default();
    let one = Tensor::<B, 1>::ones([1], &device);
    let n = Tensor::cat(reduce_fused(id, vec![one], ReduceOperation::Sum, processes)?, 0).into_scalar();
    Ok(burn::tensor::ElementConversion::elem::<f32>(n).round() as usize)
}

impl<B: AutodiffBackend, O: Optimizer<GraphNet<B>, B>> Replicas<B, O> {
    /// Every replica's next report, in order; bounded by the world's
    /// timeout when other processes take part.
    fn collect(&mut self) -> Result<Vec<Report<B>>, TrainError> {
        let Replicas::Parallel { workers, world, failed } = self else {
            return Ok(Vec::new());
        };
        let timeout = world.as_ref().map(|w| Duration::from_secs_f64(w.timeout_s));
        let mut out = Vec::with_capacity(workers.len());
        for (w, worker) in workers.iter().enumerate() {
            let report = match timeout {
                Some(t) => worker.reports.recv_timeout(t).map_err(|e| match e {
                    RecvTimeoutError::Timeout => TrainError::Backend(format!(
                        "replica {w} heard nothing from its peers for {:.0} s: another process died, or a peer or the coordinator at {} is unreachable (distributed.timeout_s)",
                        t.as_secs_f64(),
                        world.as_ref().map_or("?", |w| w.coordinator.as_str())
                    )),
                    RecvTimeoutError::Disconnected => gone(w),
                }),
                None => worker.reports.recv().map_err(|_| gone(w)),
            };
            match report {
                Ok(Report::Failed(message)) => {
                    *failed = true;
                    return Err(TrainError::Backend(message));
                }
                Ok(report) => out.push(report),
                Err(e) => {
                    *failed = true;
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// Hand one order to each replica, in order.
    fn send_all(&mut self, orders: impl IntoIterator<Item = Order>) -> Result<(), TrainError> {
        if let Replicas::Parallel { workers, failed, .. } = self {
            for (w, (worker, order)) in workers.iter().zip(orders).enumerate() {
                let sent = worker.orders.as_ref().is_some_and(|o| o.send(order).is_ok());
                if !sent {
                    *failed = true;
                    return Err(gone(w));
                }
            }
        }
        Ok(())
    }

    /// Wait until every replica has joined the collective.
    fn wait_ready(&mut self) -> Result<(), TrainError> {
        for (w, report) in self.collect()?.into_iter().enumerate() {
            if !matches!(report, Report::Ready) {
                return Err(out_of_step(w));
            }
        }
        Ok(())
    }

    /// One training step on `batch` (this process's part of the global batch) at learning rate `lr`.
    pub fn step(&mut self, batch: Batch, lr: f64) -> Result<Stepped<B::InnerBackend>, TrainError> {
        if let Replicas::Local { model, optim, device, task } = self {
            let s = task.score(model, batch, device);
            let grads = GradientsParams::from_grads(s.loss.backward(), &*model);
            *model = optim.step(lr, model.clone(), grads);
            return Ok(Stepped {
                losses: vec![s.loss.inner()],
                correct: vec![s.correct.inner()],
                total: s.total,
                ranked: s.ranked.map(|(p, t)| (p.inner(), t)).into_iter().collect(),
                all_reduce_s: 0.0,
            });
        }
        let n = self.len();
        let shards = batch.split(n);
        if shards.iter().any(|s| s.count == 0) {
            return Err(TrainError::Backend(format!(
                "a batch of {} images cannot give each of {n} replicas at least one",
                shards.iter().map(|s| s.count).sum::<usize>(),
            )));
        }
        self.send_all(shards.into_iter().map(|shard| Order::Step { shard, lr }))?;
        let mut out = Stepped {
            losses: Vec::new(),
            correct: Vec::new(),
            total: 0,
            ranked: Vec::new(),
            all_reduce_s: 0.0,
        };
        for (w, report) in self.collect()?.into_iter().enumerate() {
            let Report::Stepped { loss, correct, total, ranked, all_reduce_s } = report else {
                return Err(out_of_step(w));
            };
            out.losses.push(loss);
            out.correct.push(correct);
            out.total += total;
            out.ranked.extend(ranked);
            out.all_reduce_s = out.all_reduce_s.max(all_reduce_s);
        }
        Ok(out)
    }

    /// Replicas in this process.
    pub fn len(&self) -> usize {
        match self {
            Replicas::Local { .. } => 1,
            Replicas::Parallel { workers, .. } => workers.len(),
        }
    }

    /// The model to evaluate, without autodiff: the first replica's
    /// parameters with all replicas' mean batch-norm running statistics.
    pub fn model(&mut self) -> Result<GraphNet<B::InnerBackend>, TrainError> {
        Ok(self.models()?.remove(0))
    }

    /// Every replica's model without autodiff, each with the mean
    /// batch-norm statistics, for checks that they agree.
    pub fn models(&mut self) -> Result<Vec<GraphNet<B::InnerBackend>>, TrainError> {
        if let Replicas::Local { model, .. } = self {
            return Ok(vec![model.valid()]);
        }
        self.send_all((0..self.len()).map(|_| Order::Model))?;
        let mut models = Vec::new();
        for (w, report) in self.collect()?.into_iter().enumerate() {
            let Report::Model(model) = report else { return Err(out_of_step(w)) };
            models.push(model);
        }
        Ok(models)
    }

    /// Every peer's row of `width` figures (this process gives `row`) and
    /// the fingerprint of its parameters: one row of `width + 4` per peer,
    /// in peer order. A single replica has only its own.
    pub fn gather(&mut self, row: Vec<f32>) -> Result<Vec<Vec<f32>>, TrainError> {
        let width = row.len();
        if let Replicas::Local { model, .. } = self {
            let mut own = row;
            own.extend(fingerprint(&*model).map_err(TrainError::Backend)?);
            return Ok(vec![own]);
        }
        let mut row = Some(row);
        self.send_all((0..self.len()).map(|_| Order::Gather { row: row.take(), width }))?;
        let reports = self.collect()?;
        let Some(Report::Gathered(table)) = reports.into_iter().next() else { return Err(out_of_step(0)) };
        rows_of(&table, width)
    }
}

/// A gathered table cut into its peers' rows of `width` figures and a
/// fingerprint; an empty or ragged table is an error, not fewer peers.
fn rows_of(table: &[f32], width: usize) -> Result<Vec<Vec<f32>>, TrainError> {
    if table.is_empty() || !table.len().is_multiple_of(width + 4) {
        return Err(TrainError::Backend(format!(
            "the gathered per-process figures hold {} values, not whole rows of {}",
            table.len(),
            width + 4
        )));
    }
    Ok(table.chunks(width + 4).map(<[f32]>::to_vec).collect())
}

fn out_of_step(w: usize) -> TrainError {
    TrainError::Backend(format!("replica {w} is out of step"))
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
        TrainPlan {
            batch_size: 8,
            eval_batch_size: 8,
            warmup_steps: 0,
            parallel: Parallel { devices, ..Parallel::default() },
            ..TrainPlan::default()
        }
    }

    /// Replicas that start apart (lazy initialisers draw anew for each
    /// clone) or miss an all-reduce would differ after a few steps. Each
    /// keeps batch-norm statistics from its own shards; evaluation gets
    /// their mean, the same in every replica.
    #[test]
    fn replicas_stay_identical_with_batch_norm() {
        let _one = COLLECTIVE.lock().unwrap_or_else(|e| e.into_inner());
        let graph = graph(true);
        let mut pair = start(model(&graph), vec![FlexDevice; 2], &plan(2), Task::Classify, None).unwrap();
        for step in 0..4 {
            let s = pair.step(batch(8, step), 0.1).unwrap();
            assert_eq!((s.losses.len(), s.total), (2, 8));
            assert!(s.losses.iter().all(|l| l.clone().into_scalar().is_finite()));
        }
        let models = pair.models().unwrap();
        let stats = |m: &GraphNet<Flex>| -> Vec<Vec<f32>> {
            m.running_stats().into_iter().map(|t| t.into_data().to_vec::<f32>().unwrap()).collect()
        };
        assert_eq!(stats(&models[0]).len(), 2, "one batch norm: mean and variance");
        assert_eq!(values(&models[0]), values(&models[1]), "replicas agree after 4 steps");
        assert_eq!(stats(&models[0]), stats(&models[1]), "evaluation statistics are shared");
        assert!(stats(&models[0])[0].iter().any(|m| m.abs() > 1e-4), "the running mean moved");
        let rows = pair.gather(vec![1.0, 2.0]).unwrap();
        assert_eq!(rows.len(), 2, "one row per replica");
        assert_eq!(&rows[0][..2], [1.0, 2.0], "this process's figures in its first replica's row");
        assert_eq!(rows[0][2..], rows[1][2..], "the same parameter fingerprint");
        assert!(rows[0][2..].iter().any(|&v| v != 0.0));
        let x: Tensor<Flex, 4> = Tensor::ones([2, 1, 6, 6], &FlexDevice);
        let y = |m: &GraphNet<Flex>| m.clone().forward(x.clone()).into_data().to_vec::<f32>().unwrap();
        assert_eq!(y(&models[0]), y(&models[1]));
    }

    /// At a learning rate of 0 the parameters stay put, so each replica's
    /// running statistics are those of one device fed its shards alone; the
    /// evaluated model must carry their mean, not either replica's own.
    #[test]
    fn evaluation_gets_the_mean_of_the_replicas_statistics() {
        let _one = COLLECTIVE.lock().unwrap_or_else(|e| e.into_inner());
        let graph = graph(true);
        let mut pair = start(model(&graph), vec![FlexDevice; 2], &plan(2), Task::Classify, None).unwrap();
        let mut halves: Vec<_> = (0..2)
            .map(|_| start(model(&graph), vec![FlexDevice], &plan(1), Task::Classify, None).unwrap())
            .collect();
        for step in 0..3 {
            pair.step(batch(8, step), 0.0).unwrap();
            for (half, shard) in halves.iter_mut().zip(batch(8, step).split(2)) {
                half.step(shard, 0.0).unwrap();
            }
        }
        let stats = |m: GraphNet<Flex>| -> Vec<Vec<f32>> {
            m.running_stats().into_iter().map(|t| t.into_data().to_vec::<f32>().unwrap()).collect()
        };
        let (a, b) = (stats(halves[0].model().unwrap()), stats(halves[1].model().unwrap()));
        assert_ne!(a[0], b[0], "the shards give different statistics");
        for evaluated in pair.models().unwrap() {
            let got = stats(evaluated);
            for (k, (got, (a, b))) in got.iter().zip(a.iter().zip(&b)).enumerate() {
                for (g, (x, y)) in got.iter().zip(a.iter().zip(b)) {
                    assert!((g - (x + y) / 2.0).abs() < 1e-5, "statistic {k}: {got:?} vs {a:?} and {b:?}");
                }
            }
        }
    }

    /// Without batch norm, two replicas averaging the gradients of their
    /// half-batch mean losses take the same steps as one device on the
    /// whole batch.
    #[test]
    fn two_replicas_train_as_one_device_on_the_whole_batch() {
        let _one = COLLECTIVE.lock().unwrap_or_else(|e| e.into_inner());
        let graph = graph(false);
        let mut one = start(model(&graph), vec![FlexDevice], &plan(1), Task::Classify, None).unwrap();
        let mut two = start(model(&graph), vec![FlexDevice; 2], &plan(2), Task::Classify, None).unwrap();
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

    #[test]
    fn an_empty_or_ragged_gather_is_an_error_not_fewer_peers() {
        assert_eq!(rows_of(&[1.0; 12], 2).unwrap().len(), 2);
        for table in [&[][..], &[1.0; 11][..]] {
            let err = rows_of(table, 2).unwrap_err().to_string();
            assert!(err.contains("not whole rows of 6"), "{err}");
        }
    }
}
