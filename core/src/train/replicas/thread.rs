//! The replica protocol: the orders the step loop sends each replica's
//! thread, the reports it answers with, and the replica's loop that serves
//! them (a step with its gradient all-reduce, the model for evaluation, a
//! gather of per-process figures). Nothing here decides what to train.

use super::buckets::{self, BucketPlan, Exchanged};
use super::comm::ThreadLink;
use super::fused::{adopt_first, collective_peers, fingerprint, reduce_fused, reduce_gradients, Link};
use crate::config::TrainPlan;
use crate::data::Batch;
use crate::model::GraphNet;
use crate::train::optim::Sgd;
use crate::train::records::fence::compute_done;
use crate::train::records::phases::{Clock, PhaseSeconds};
use crate::train::records::timeline::ReplicaSpans;
use crate::train::task::{Inputs, Task};
use crate::train::{exposed_s, TrainError};
use benchkit_schema::Phase;
use burn::collective::{self, CollectiveConfig, PeerId, ReduceOperation};
use burn::module::{AutodiffModule, Module};
use burn::optim::GradientsParams;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor, TensorData};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::Instant;

pub(super) enum Order {
    Step {
        /// This replica's part of the step's batch.
        part: Batch,
        lr: f64,
        /// Time the step's phases, synchronising the device at each edge.
        profiled: bool,
    },
    Model,
    /// Sum `row` (this process's figures, or none) into a table of one row per peer.
    Gather {
        row: Option<Vec<f32>>,
        width: usize,
    },
}

pub(super) enum Report<B: AutodiffBackend> {
    Ready,
    Stepped {
        loss: Tensor<B::InnerBackend, 1>,
        correct: Tensor<B::InnerBackend, 1, Int>,
        total: usize,
        ranked: Option<(Tensor<B::InnerBackend, 2>, Vec<f32>)>,
        /// The all-reduce the step waited for after the device finished its
        /// backward pass ([`crate::train::exposed_s`]).
        exposed_communication_s: f64,
        /// The all-reduce thread's seconds on the step's buckets, hidden or
        /// not (`exposed_communication_s` where nothing overlaps).
        communication_s: f64,
        phases: Option<PhaseSeconds>,
        /// When its parts of the step happened, for the timeline.
        spans: ReplicaSpans,
    },
    Model(GraphNet<B::InnerBackend>),
    Gathered(Vec<f32>),
    Failed(TrainError),
}

pub(crate) struct ReplicaThread<B: AutodiffBackend> {
    /// Closed (taken) to stop the replica.
    pub(super) orders: Option<Sender<Order>>,
    pub(super) reports: Receiver<Report<B>>,
}

/// A replica's place: its index in this process and among all peers, and
/// how many processes share the collective.
#[derive(Clone, Copy)]
pub(super) struct Peer {
    pub(super) local: usize,
    pub(super) global: usize,
    pub(super) processes: usize,
}

/// What a replica's all-reduces go through, before it joins.
pub(super) enum Joining<B: Backend> {
    /// burn-collective, with this configuration.
    Burn(CollectiveConfig),
    /// A collective this process has joined already, through its all-reduce thread.
    Thread(ThreadLink<B>),
}

/// A replica's loop: join the collective, then take orders until the step
/// loop hangs up.
#[allow(clippy::too_many_arguments)]
pub(super) fn serve<B: AutodiffBackend>(
    peer: Peer,
    mut model: GraphNet<B>,
    device: B::Device,
    joining: Joining<B::InnerBackend>,
    plan: &TrainPlan,
    task: Task,
    orders: Receiver<Order>,
    reports: Sender<Report<B>>,
) -> Result<(), TrainError> {
    let w = peer.local;
    let id = PeerId::from(peer.global as u32);
    let mut link = match joining {
        Joining::Burn(config) => {
            collective::register::<B::InnerBackend>(id, device.clone(), config).map_err(|e| {
                TrainError::Backend(format!("replica {w} could not join the all-reduce: {e:?}"))
            })?;
            Link::Burn(id)
        }
        Joining::Thread(link) => Link::Thread(link),
    };
    let bucket_plan = match &link {
        Link::Thread(_) => {
            let value_bytes = plan.parallel.gradient_value_bytes(plan.precision, peer.processes);
            Some(Arc::new(BucketPlan::of(&model, plan.parallel.bucket_bytes(), value_bytes)))
        }
        Link::Burn(_) => None,
    };
    let link = &mut link;
    if peer.processes > 1 {
        model = adopt_first(link, peer.global == 0, model, peer.processes)
            .map_err(|e| e.within(&format!("replica {w} could not take rank 0's parameters")))?;
    }
    if reports.send(Report::Ready).is_err() {
        return Ok(());
    }
    let mut optim = Sgd::<B>::new(plan);
    let mut inputs = Inputs::default();
    while let Ok(order) = orders.recv() {
        let report = match order {
            Order::Step { part, lr, profiled } => {
                let own = |e: TrainError| e.within(&format!("replica {w}"));
                let started = Instant::now();
                let mut clock = Clock::<B>::start(&device, profiled);
                let uploaded = task.upload(part, &mut inputs, &device).map_err(own)?;
                clock.mark(Phase::HostToDevice).map_err(own)?;
                let s = task.loss(&model, uploaded);
                clock.mark(Phase::Forward).map_err(own)?;
                let in_flight = match (&*link, &bucket_plan) {
                    (Link::Thread(host), Some(plan)) => Some(buckets::arm(plan, &model, host).map_err(own)?),
                    _ => None,
                };
                let grads = GradientsParams::from_grads(s.loss.backward(), &model);
                clock.mark(Phase::Backward).map_err(own)?;
                let t0 = Instant::now();
                let fence = || compute_done::<B>(&device);
                let exchanged = match (in_flight, &*link) {
                    (Some(in_flight), Link::Thread(host)) => in_flight.finish(host, &model, grads, fence),
                    _ => fence().and_then(|backward_done| {
                        let grads = reduce_gradients(link, &model, grads, peer.processes)?;
                        let communication_s = backward_done.unwrap_or(t0).elapsed().as_secs_f64();
                        Ok(Exchanged { grads, communication_s, backward_done, buckets: Vec::new() })
                    }),
                }
                .map_err(|e| e.within(&format!("replica {w}: the gradient all-reduce failed")))?;
                let reduced = Instant::now();
                clock.mark(Phase::ExposedCommunication).map_err(own)?;
                let Exchanged { grads, communication_s, backward_done, buckets } = exchanged;
                let since = |t: Instant| t.saturating_duration_since(t0).as_secs_f64();
                let exposed_communication_s = exposed_s(backward_done.map_or(0.0, since), since(reduced));
                model = optim.step(lr, model, grads);
                clock.mark(Phase::Optimizer).map_err(own)?;
                Report::Stepped {
                    loss: s.loss.inner(),
                    correct: s.correct.inner(),
                    total: s.total,
                    ranked: s.ranked.map(|(p, t)| (p.inner(), t)),
                    exposed_communication_s,
                    communication_s,
                    phases: clock.finish(),
                    spans: ReplicaSpans {
                        replica: w,
                        start: started,
                        backward_end: backward_done.unwrap_or(t0),
                        reduced,
                        end: Instant::now(),
                        buckets,
                    },
                }
            }
            Order::Model => {
                let valid = model.valid();
                let mean = reduce_fused(link, valid.running_stats(), ReduceOperation::Mean, peer.processes)
                    .map_err(|e| e.within(&format!("replica {w}: averaging batch-norm statistics")))?;
                Report::Model(if mean.is_empty() { valid } else { valid.with_running_stats(mean) })
            }
            Order::Gather { row, width } => Report::Gathered(
                gather(&model, link, peer, row, width).map_err(|e| e.within(&format!("replica {w}")))?,
            ),
        };
        if reports.send(report).is_err() {
            break;
        }
    }
    if let Link::Burn(id) = link {
        let _ = collective::finish_collective::<B::InnerBackend>(*id);
    }
    Ok(())
}

/// Sum every peer's row of `width` figures (this process's in its first
/// replica's row) and parameter fingerprint into one table, a row a peer.
fn gather<B: AutodiffBackend>(
    model: &GraphNet<B>,
    link: &mut Link<B::InnerBackend>,
    peer: Peer,
    row: Option<Vec<f32>>,
    width: usize,
) -> Result<Vec<f32>, TrainError> {
    let valid = model.valid();
    let peers = collective_peers(&valid, link, peer.processes)?;
    let mut table = vec![0.0f32; peers * (width + 4)];
    let at = peer.global * (width + 4);
    if let Some(row) = row {
        for (k, v) in row.into_iter().take(width).enumerate() {
            table[at + k] = v;
        }
    }
    table[at + width..at + width + 4].copy_from_slice(&fingerprint(model).map_err(TrainError::Backend)?);
    // A float narrower than f32 (bf16, f16) would round the figures: each
    // then travels as its four bytes, each exact in any float format.
    let exact =
        std::mem::size_of::<<B::InnerBackend as burn::tensor::backend::BackendTypes>::FloatElem>() >= 4;
    let values: Vec<f32> = if exact {
        table
    } else {
        table.iter().flat_map(|v| v.to_bits().to_le_bytes().map(f32::from)).collect()
    };
    let device = valid.devices().into_iter().next().unwrap_or_default();
    let len = values.len();
    let t = Tensor::<B::InnerBackend, 1>::from_data(TensorData::new(values, [len]), &device);
    let summed = reduce_fused(link, vec![t], ReduceOperation::Sum, peer.processes)?;
    let back = Tensor::cat(summed, 0)
        .into_data()
        .convert::<f32>()
        .to_vec::<f32>()
        .map_err(|e| TrainError::Backend(format!("cannot read the gathered figures back: {e:?}")))?;
    Ok(if exact { back } else { from_bytes(&back) })
}

/// The f32s whose little-endian bytes `bytes` holds, one byte a value.
fn from_bytes(bytes: &[f32]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_bits(u32::from_le_bytes([b[0] as u8, b[1] as u8, b[2] as u8, b[3] as u8])))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn figures_sent_as_bytes_come_back_exact_through_bf16() {
        let figures = [16_777_215.0f32, -0.1, f32::NAN, 3.0e-39];
        let bytes: Vec<f32> = figures.iter().flat_map(|v| v.to_bits().to_le_bytes().map(f32::from)).collect();
        // Each byte is exact in bf16 (8 significant bits), as the sum of one value and zeros.
        let through: Vec<f32> =
            bytes.iter().map(|&b| burn::tensor::bf16::from_f32(b).to_f32() + 0.0).collect();
        let back = super::from_bytes(&through);
        assert_eq!(back.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), figures.map(f32::to_bits));
    }
}
