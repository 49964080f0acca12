//! The thread that carries a process's all-reduces over a collective other
//! than burn's (Gloo, NCCL). Jobs run one at a time in the order they were
//! sent, which is the same order on every rank; each joins its tensors
//! into one flat tensor, sums it across the ranks (on the host for Gloo,
//! on the device for NCCL) and hands it back. The step loop sends a step's
//! gradient buckets while its backward pass still runs and waits for them
//! only when it needs them.

use crate::train::collective::Summer;
use crate::train::TrainError;
use burn::collective::ReduceOperation;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Instant;

/// Tensors to sum across the ranks as one buffer.
pub(super) struct Job<B: Backend> {
    pub(super) parts: Vec<Tensor<B, 1>>,
    pub(super) op: ReduceOperation,
    pub(super) device: B::Device,
}

/// A job's result: the flat sum (or mean), and the seconds the thread
/// spent on it, from reading the tensors to the result on the device.
pub(super) struct Done<B: Backend> {
    pub(super) flat: Tensor<B, 1>,
    pub(super) seconds: f64,
}

/// A collective behind its own thread.
pub(crate) struct ThreadLink<B: Backend> {
    jobs: Option<Sender<Job<B>>>,
    done: Receiver<Result<Done<B>, TrainError>>,
    thread: Option<JoinHandle<()>>,
}

impl<B: Backend> ThreadLink<B> {
    /// Start the thread that owns `sum`, one of `ranks` processes.
    pub(crate) fn start(ranks: usize, sum: Summer) -> Result<Self, TrainError> {
        let (jobs, their_jobs) = channel::<Job<B>>();
        let (their_done, done) = channel();
        let thread = std::thread::Builder::new()
            .name("benchkit-all-reduce".into())
            .spawn(move || serve(ranks, sum, their_jobs, their_done))
            .map_err(|e| TrainError::Backend(format!("cannot start the all-reduce thread: {e}")))?;
        Ok(Self { jobs: Some(jobs), done, thread: Some(thread) })
    }

    /// A handle that sends jobs from another place (the backward pass's gradient hand-out).
    pub(super) fn sender(&self) -> Result<Sender<Job<B>>, TrainError> {
        self.jobs.clone().ok_or_else(gone)
    }

    pub(super) fn send(&self, job: Job<B>) -> Result<(), TrainError> {
        self.jobs.as_ref().ok_or_else(gone)?.send(job).map_err(|_| gone())
    }

    /// The oldest job not yet waited for.
    pub(super) fn wait(&self) -> Result<Done<B>, TrainError> {
        self.done.recv().map_err(|_| gone())?
    }

    /// `parts` summed (or averaged) across the ranks, cut back into parts.
    pub(super) fn reduce(
        &self,
        parts: Vec<Tensor<B, 1>>,
        op: ReduceOperation,
    ) -> Result<Vec<Tensor<B, 1>>, TrainError> {
        let Some(device) = parts.first().map(Tensor::device) else {
            return Ok(parts);
        };
        let lens: Vec<usize> = parts.iter().map(|t| t.dims()[0]).collect();
        self.send(Job { parts, op, device })?;
        Ok(super::fused::split(&self.wait()?.flat, lens))
    }
}

impl<B: Backend> Drop for ThreadLink<B> {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn gone() -> TrainError {
    TrainError::Backend("the all-reduce thread has stopped".into())
}

fn serve<B: Backend>(
    ranks: usize,
    mut sum: Summer,
    jobs: Receiver<Job<B>>,
    done: Sender<Result<Done<B>, TrainError>>,
) {
    for job in jobs {
        let start = Instant::now();
        let result =
            run(ranks, &mut sum, job).map(|flat| Done { flat, seconds: start.elapsed().as_secs_f64() });
        if done.send(result).is_err() {
            return;
        }
    }
}

fn run<B: Backend>(ranks: usize, sum: &mut Summer, job: Job<B>) -> Result<Tensor<B, 1>, TrainError> {
    let Job { parts, op, device } = job;
    let total: usize = parts.iter().map(|t| t.dims()[0]).sum();
    let flat = Tensor::cat(parts, 0);
    let n = ranks as f32;
    match sum {
        Summer::Host(sum) => {
            let mut values =
                flat.into_data().convert::<f32>().to_vec::<f32>().map_err(|e| {
                    TrainError::Backend(format!("cannot read the values to all-reduce: {e:?}"))
                })?;
            sum.sum(&mut values)?;
            if op == ReduceOperation::Mean {
                values.iter_mut().for_each(|v| *v /= n);
            }
            Ok(Tensor::from_data(TensorData::new(values, [total]), &device))
        }
        Summer::Device(sum) => {
            let mut primitive = flat.into_primitive().tensor();
            sum.sum(&mut primitive)?;
            let summed = Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(primitive));
            Ok(if op == ReduceOperation::Mean { summed.div_scalar(n) } else { summed })
        }
    }
}
