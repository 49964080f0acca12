//! The model being trained, as one replica on the step loop's thread or as
//! data-parallel replicas, one per GPU, or on the CPU each with its own thread pool. Replicas
//! start as clones of one materialised model, take equal parts of every
//! global batch, average their gradients and apply the same optimizer
//! step, so they stay identical.
//!
//! Several processes (ranks) train one cell together, joined by one of two
//! links. burn-collective: rank 0 serves its global orchestrator, every
//! replica of every process is one peer, and all of a step's gradients go
//! fused into one flat tensor after the backward pass. A host collective
//! (Gloo), one replica a process: the gradients go in buckets, each
//! all-reduced on its own thread while the backward pass goes on
//! (`buckets`, `comm`). Parameters get
//! ids in module order and start from rank 0's values, so every process
//! holds the same network whatever its own initialisation drew.
//!
//! Batch-norm running statistics are kept per replica, each from its own
//! parts (a clone's would otherwise be shared across threads, which burn's
//! autodiff graphs do not survive), and averaged over all replicas of all
//! processes for every evaluation.

mod buckets;
mod comm;
mod fused;
#[cfg(test)]
mod tests;
mod thread;

use fused::fingerprint;
pub(super) use fused::gradient_bytes;

use super::pipeline::Pipeline;
use super::records::phases::{slowest, Clock};
use super::records::{Gather, Stepped};
use super::task::{Inputs, Task};
use super::TrainError;
use crate::config::{CollectiveKind, TrainPlan};
use crate::data::Batch;
use crate::model::{Graph, GraphNet};
use crate::train::collective::world::{self, World};
use crate::train::collective::Summer;
use crate::train::optim::Sgd;
use benchkit_schema::Phase;
use burn::module::{AutodiffModule, Module};
use burn::optim::GradientsParams;
use burn::tensor::backend::{AutodiffBackend, Backend};
use comm::ThreadLink;
use fused::number_params;
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::Duration;
use thread::{serve, Joining, Order, Peer, ReplicaThread, Report};

/// How long a stopping replica may take to leave the collective.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(30);

impl<B: AutodiffBackend> Drop for Placement<B> {
    /// Stop every replica, then wait (boundedly) until each has left the
    /// collective, so that the process can start another set. Replicas that
    /// failed may be stuck in a collective call: they are left behind.
    fn drop(&mut self) {
        if let Placement::Parallel { threads, failed, .. } = self {
            for thread in threads.iter_mut() {
                thread.orders.take();
            }
            if !*failed {
                for thread in threads.iter() {
                    while thread.reports.recv_timeout(LEAVE_TIMEOUT).is_ok() {}
                }
            }
        }
    }
}

/// The model as trained: one replica here, one per replica on thread
/// threads, or a pipeline of stages.
pub(crate) enum Placement<B: AutodiffBackend> {
    Local {
        model: GraphNet<B>,
        optim: Sgd<B>,
        device: B::Device,
        task: Task,
        inputs: Inputs<B>,
        /// Whether profiled steps also time each op of the graph.
        ops: bool,
    },
    Parallel {
        threads: Vec<ReplicaThread<B>>,
        world: Option<World>,
        /// Set once a replica failed or stopped answering.
        failed: bool,
    },
    Pipeline(Box<Pipeline<B>>),
}

/// Start the replicas of `model` (built from `graph`) on `devices`, joined
/// by the processes of `world` when there is one (a single replica: no
/// threads, no collective), or the plan's pipeline.
pub(crate) fn start<B: AutodiffBackend>(
    model: GraphNet<B>,
    graph: &Graph,
    devices: Vec<B::Device>,
    plan: &TrainPlan,
    task: Task,
    world: Option<World>,
) -> Result<Placement<B>, TrainError> {
    if let Some(pipeline) = &plan.parallel.pipeline {
        return Ok(Placement::Pipeline(Box::new(super::pipeline::start(
            model, graph, devices, plan, pipeline, task,
        )?)));
    }
    let world = world.filter(|w| w.processes > 1);
    if devices.len() <= 1 && world.is_none() {
        let device = devices.into_iter().next().unwrap_or_default();
        return Ok(Placement::Local {
            model,
            optim: Sgd::new(plan),
            device,
            task,
            inputs: Inputs::default(),
            ops: plan.ops,
        });
    }
    model.materialise();
    let model = number_params(model);
    let n = devices.len();
    let processes = world.as_ref().map_or(1, |w| w.processes);
    let mut links = match process_collective(plan, world.as_ref(), n)? {
        Some(sum) => ThreadLink::<B::InnerBackend>::start(n * processes, n, sum)?,
        None => Vec::new(),
    }
    .into_iter();
    let config = match links.len() {
        0 => Some(world::collective_config(n, plan, world.as_ref())?),
        _ => None,
    };
    let rank = world.as_ref().map_or(0, |w| w.rank);
    let mut threads = Vec::with_capacity(n);
    for (w, device) in devices.into_iter().enumerate() {
        let (orders, their_orders) = channel();
        let (their_reports, reports) = channel();
        // A fork has its own autodiff leaves: replicas that shared them
        // would merge their graphs across threads.
        let replica = model.clone().with_own_running_stats().fork(&device);
        let joining = match (links.next(), &config) {
            (Some(link), _) => Joining::Thread(link),
            (None, Some(config)) => Joining::Burn(config.clone()),
            (None, None) => return Err(TrainError::Setup(format!("no all-reduce link for replica {w}"))),
        };
        let plan = plan.clone();
        let pool_threads = plan.parallel.threads_per_device;
        let peer = Peer { local: w, global: rank * n + w, processes };
        std::thread::Builder::new()
            .name(format!("benchkit-replica-{w}"))
            .spawn(move || {
                let work = move || {
                    let failed = their_reports.clone();
                    if let Err(e) =
                        serve::<B>(peer, replica, device, joining, &plan, task, their_orders, their_reports)
                    {
                        let _ = failed.send(Report::Failed(e));
                    }
                };
                match pool_threads.map(|t| rayon::ThreadPoolBuilder::new().num_threads(t).build()) {
                    Some(Ok(pool)) => pool.install(work),
                    _ => work(),
                }
            })
            .map_err(|e| TrainError::Backend(format!("cannot start the thread of replica {w}: {e}")))?;
        threads.push(ReplicaThread { orders: Some(orders), reports });
    }
    let mut replicas = Placement::Parallel { threads, world, failed: false };
    replicas.wait_ready()?;
    Ok(replicas)
}

/// The bytes on the wire of each gradient bucket `model` sends per step
/// over the collective `plan` asks for (Gloo, NCCL); none where burn-collective carries
/// all gradients fused, or within one process.
pub(crate) fn bucket_bytes<B: Backend>(model: &GraphNet<B>, plan: &TrainPlan, processes: usize) -> Vec<u64> {
    if processes < 2 || plan.parallel.collective == CollectiveKind::Burn {
        return Vec::new();
    }
    let value_bytes = plan.parallel.gradient_value_bytes(plan.precision, processes);
    buckets::BucketPlan::of(model, plan.parallel.bucket_bytes(), value_bytes)
        .bytes()
        .into_iter()
        .map(|b| b as u64)
        .collect()
}

/// The collective (Gloo, NCCL) that joins this process to the others of
/// `world` when the plan asks for one; `None` for burn-collective.
fn process_collective(
    plan: &TrainPlan,
    world: Option<&World>,
    devices: usize,
) -> Result<Option<Summer>, TrainError> {
    let kind = plan.parallel.collective;
    let Some(world) = world.filter(|_| kind != CollectiveKind::Burn) else {
        return Ok(None);
    };
    if devices != 1 && kind == CollectiveKind::Nccl {
        return Err(TrainError::Setup(format!(
            "distributed.collective = \"nccl\" carries one replica (one GPU) per process, but this process has {devices}"
        )));
    }
    #[cfg(feature = "tch")]
    {
        use crate::train::collective::{GlooCollective, NcclCollective};
        Ok(Some(match kind {
            CollectiveKind::Nccl => Summer::Device(Box::new(NcclCollective::join(world.clone())?)),
            _ => Summer::Host(Box::new(GlooCollective::join(world.clone())?)),
        }))
    }
    #[cfg(not(feature = "tch"))]
    {
        let why = crate::backend::collective_built(kind).err().unwrap_or_default();
        Err(TrainError::Setup(format!(
            "rank {}: distributed.collective = \"{}\": {why}",
            world.rank,
            kind.name()
        )))
    }
}

impl<B: AutodiffBackend> Placement<B> {
    /// Every replica's next report, in order; bounded by the world's
    /// timeout when other processes take part.
    fn collect(&mut self) -> Result<Vec<Report<B>>, TrainError> {
        let Placement::Parallel { threads, world, failed } = self else {
            return Ok(Vec::new());
        };
        let timeout = world.as_ref().map(|w| Duration::from_secs_f64(w.timeout_s));
        let mut out = Vec::with_capacity(threads.len());
        for (w, thread) in threads.iter().enumerate() {
            let report = match timeout {
                Some(t) => thread.reports.recv_timeout(t).map_err(|e| match (e, world.as_ref()) {
                    (RecvTimeoutError::Timeout, Some(world)) => {
                        if world.rank == 0 {
                            std::thread::sleep(world::RANK_0_GRACE);
                        }
                        TrainError::LostPeer(format!("replica {w} {}", world.lost_peer(t)))
                    }
                    _ => gone(w),
                }),
                None => thread.reports.recv().map_err(|_| gone(w)),
            };
            match report {
                // The collective broke off before the timeout: which peer went is
                // told as it is after a timeout.
                Ok(Report::Failed(TrainError::LostPeer(why))) => {
                    *failed = true;
                    return Err(TrainError::LostPeer(match world.as_ref() {
                        Some(world) => world.broke_off(why),
                        None => why,
                    }));
                }
                Ok(Report::Failed(e)) => {
                    *failed = true;
                    return Err(e);
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
        if let Placement::Parallel { threads, failed, .. } = self {
            for (w, (thread, order)) in threads.iter().zip(orders).enumerate() {
                let sent = thread.orders.as_ref().is_some_and(|o| o.send(order).is_ok());
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

    /// One training step on `batch` (this process's part of the global
    /// batch) at learning rate `lr`, its phases timed when `profiled`.
    pub fn step(
        &mut self,
        batch: Batch,
        lr: f64,
        profiled: bool,
    ) -> Result<Stepped<B::InnerBackend>, TrainError> {
        if let Placement::Pipeline(pipeline) = self {
            return pipeline.step(batch, lr);
        }
        if let Placement::Local { model, optim, device, task, inputs, ops } = self {
            use crate::model::op_clock::{self, Charge};
            // Disarms the clock when the step fails part-way; a finished step has.
            struct Disarm;
            impl Drop for Disarm {
                fn drop(&mut self) {
                    let _ = op_clock::finish();
                }
            }
            let _disarm = Disarm;
            if profiled && *ops {
                let d = device.clone();
                op_clock::arm(model.nodes(), Box::new(move || B::sync(&d).map_err(|e| format!("{e:?}"))));
            }
            let mut clock = Clock::<B>::start(device, profiled);
            let uploaded = task.upload(batch, inputs, device)?;
            op_clock::mark(Charge::HostToDevice);
            clock.mark(Phase::HostToDevice)?;
            let s = task.loss(model, uploaded);
            op_clock::mark(Charge::LossForward);
            clock.mark(Phase::Forward)?;
            let pass = s.loss.backward();
            op_clock::mark(Charge::Untagged);
            let grads = GradientsParams::from_grads(pass, &*model);
            op_clock::mark(Charge::Gradients);
            clock.mark(Phase::Backward)?;
            model.replace_with(|m| optim.step(lr, m, grads));
            op_clock::mark(Charge::Optimizer);
            clock.mark(Phase::Optimizer)?;
            let ops = op_clock::finish().transpose().map_err(|e| {
                TrainError::Backend(format!("device synchronisation while timing the ops failed: {e}"))
            })?;
            return Ok(Stepped {
                losses: vec![s.loss.inner()],
                correct: vec![s.correct.inner()],
                total: s.total,
                ranked: s.ranked.map(|(p, t)| (p.inner(), t)).into_iter().collect(),
                exposed_communication_s: 0.0,
                communication_s: 0.0,
                ops,
                phases: clock.finish(),
                stage_busy_s: Vec::new(),
                replicas: Vec::new(),
            });
        }
        let n = self.len();
        let parts = batch.split(n);
        if parts.iter().any(|s| s.count == 0) {
            return Err(TrainError::Backend(format!(
                "a batch of {} images cannot give each of {n} replicas at least one",
                parts.iter().map(|s| s.count).sum::<usize>(),
            )));
        }
        self.send_all(parts.into_iter().map(|part| Order::Step { part, lr, profiled }))?;
        let mut out = Stepped::empty();
        let mut phases = Vec::new();
        for (w, report) in self.collect()?.into_iter().enumerate() {
            let Report::Stepped {
                loss,
                correct,
                total,
                ranked,
                exposed_communication_s,
                communication_s,
                phases: own,
                spans,
            } = report
            else {
                return Err(out_of_step(w));
            };
            out.losses.push(loss);
            out.correct.push(correct);
            out.total += total;
            out.ranked.extend(ranked);
            out.exposed_communication_s = out.exposed_communication_s.max(exposed_communication_s);
            out.communication_s = out.communication_s.max(communication_s);
            phases.extend(own);
            out.replicas.push(spans);
        }
        out.phases = slowest(phases);
        Ok(out)
    }

    /// Replicas in this process.
    pub fn len(&self) -> usize {
        match self {
            Placement::Local { .. } | Placement::Pipeline(_) => 1,
            Placement::Parallel { threads, .. } => threads.len(),
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
        match self {
            Placement::Local { model, .. } => return Ok(vec![model.valid()]),
            Placement::Pipeline(pipeline) => return Ok(vec![pipeline.model()?]),
            Placement::Parallel { .. } => {}
        }
        self.send_all((0..self.len()).map(|_| Order::Model))?;
        let mut models = Vec::new();
        for (w, report) in self.collect()?.into_iter().enumerate() {
            let Report::Model(model) = report else { return Err(out_of_step(w)) };
            models.push(model);
        }
        Ok(models)
    }
}

impl<B: AutodiffBackend> Gather for Placement<B> {
    /// A single replica has only its own row; several send it through
    /// their threads' collective.
    fn gather(&mut self, row: Vec<f32>) -> Result<Vec<Vec<f32>>, TrainError> {
        let width = row.len();
        let mut own = row;
        match self {
            Placement::Local { model, .. } => {
                own.extend(fingerprint(&*model).map_err(TrainError::Backend)?);
                return Ok(vec![own]);
            }
            Placement::Pipeline(pipeline) => {
                own.extend(fingerprint(&pipeline.model()?).map_err(TrainError::Backend)?);
                return Ok(vec![own]);
            }
            Placement::Parallel { .. } => {}
        }
        let row = own;
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
