//! The thread that carries a process's all-reduces over a collective other
//! than burn's (Gloo, NCCL). Jobs run one at a time in the order they were
//! sent, which is the same order on every rank and every replica; each
//! joins its tensors into one flat tensor, sums it over the process's
//! replicas and then across the ranks (on the host for Gloo, on the device
//! for NCCL) and hands it back. The step loop sends a step's
//! gradient buckets while its backward pass still runs and waits for them
//! only when it needs them.

use crate::train::collective::Summer;
use crate::train::TrainError;
use burn::collective::ReduceOperation;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use std::collections::VecDeque;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// Tensors to sum across the ranks as one buffer.
pub(super) struct Job<B: Backend> {
    pub(super) parts: Vec<Tensor<B, 1>>,
    pub(super) op: ReduceOperation,
    pub(super) device: B::Device,
}

/// A job's result: the flat sum (or mean), and the seconds of
/// communication it cost. The seconds are the collective's own on
/// its stream where the device timed them (NCCL); else the thread's, from
/// reading the tensors to the result on the device (Gloo's host copies
/// included).
pub(super) struct Done<B: Backend> {
    pub(super) flat: Tensor<B, 1>,
    pub(super) seconds: f64,
    /// When the thread took the job up (every replica had sent it) and
    /// when its result was ready, on the host's clock.
    pub(super) span: (Instant, Instant),
}

/// Where a replica's jobs go: the all-reduce thread, tagged with the replica.
pub(super) struct JobSender<B: Backend> {
    replica: usize,
    jobs: Sender<(usize, Job<B>)>,
}

impl<B: Backend> JobSender<B> {
    pub(super) fn send(&self, job: Job<B>) -> Result<(), TrainError> {
        self.jobs.send((self.replica, job)).map_err(|_| gone())
    }
}

/// One replica's way to the all-reduce thread of its process.
pub(crate) struct ThreadLink<B: Backend> {
    jobs: Option<JobSender<B>>,
    done: Receiver<Result<Done<B>, TrainError>>,
    /// Joined by the last link dropped.
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl<B: Backend> ThreadLink<B> {
    /// Start the thread that owns `sum` for the `replicas` replicas of this
    /// process, among `all_replicas` in the job: one link for each replica. A job
    /// runs once every replica has sent its own (they send the same jobs in
    /// the same order): their tensors are summed here, then across the
    /// processes (hierarchically, as NCCL does within a machine), and each
    /// replica gets the result on its own device.
    pub(crate) fn start(all_replicas: usize, replicas: usize, sum: Summer) -> Result<Vec<Self>, TrainError> {
        if replicas > 1 && matches!(sum, Summer::Device(_)) {
            return Err(TrainError::Setup(format!(
                "a collective that sums on the device carries one replica per process, not {replicas}"
            )));
        }
        let (jobs, their_jobs) = channel::<(usize, Job<B>)>();
        let (their_done, done): (Vec<_>, Vec<_>) = (0..replicas).map(|_| channel()).unzip();
        let thread = std::thread::Builder::new()
            .name("benchkit-all-reduce".into())
            .spawn(move || serve(all_replicas, sum, their_jobs, their_done))
            .map_err(|e| TrainError::Backend(format!("cannot start the all-reduce thread: {e}")))?;
        let thread = Arc::new(Mutex::new(Some(thread)));
        Ok(done
            .into_iter()
            .enumerate()
            .map(|(replica, done)| Self {
                jobs: Some(JobSender { replica, jobs: jobs.clone() }),
                done,
                thread: thread.clone(),
            })
            .collect())
    }

    /// A handle that sends jobs from another place (the backward pass's gradient hand-out).
    pub(super) fn sender(&self) -> Result<JobSender<B>, TrainError> {
        let jobs = self.jobs.as_ref().ok_or_else(gone)?;
        Ok(JobSender { replica: jobs.replica, jobs: jobs.jobs.clone() })
    }

    pub(super) fn send(&self, job: Job<B>) -> Result<(), TrainError> {
        self.jobs.as_ref().ok_or_else(gone)?.send(job)
    }

    /// The oldest job not yet waited for.
    pub(super) fn wait(&self) -> Result<Done<B>, TrainError> {
        self.done.recv().map_err(|_| gone())?
    }

    /// `parts` summed (or averaged) across the all_replicas, cut back into parts.
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
        Ok(split(&self.wait()?.flat, lens))
    }
}

impl<B: Backend> Drop for ThreadLink<B> {
    fn drop(&mut self) {
        self.jobs.take();
        // The thread ends once every replica's sender is gone; the last link joins it.
        if Arc::strong_count(&self.thread) == 1 {
            let handle = self.thread.lock().ok().and_then(|mut t| t.take());
            if let Some(handle) = handle {
                let _ = handle.join();
            }
        }
    }
}

/// `e` again, for another replica: the same kind and message.
fn copy(e: &TrainError) -> TrainError {
    match e {
        TrainError::LostPeer(m) => TrainError::LostPeer(m.clone()),
        TrainError::Setup(m) => TrainError::Setup(m.clone()),
        TrainError::Backend(m) => TrainError::Backend(m.clone()),
        other => TrainError::Backend(other.to_string()),
    }
}

fn gone() -> TrainError {
    TrainError::Backend("the all-reduce thread has stopped".into())
}

/// Take jobs until every replica has hung up; run one as soon as every
/// replica has sent it, and hand each replica the result.
fn serve<B: Backend>(
    all_replicas: usize,
    mut sum: Summer,
    jobs: Receiver<(usize, Job<B>)>,
    done: Vec<Sender<Result<Done<B>, TrainError>>>,
) {
    let mut queued: Vec<VecDeque<Job<B>>> = done.iter().map(|_| VecDeque::new()).collect();
    for (replica, job) in jobs {
        let Some(queue) = queued.get_mut(replica) else { continue };
        queue.push_back(job);
        while queued.iter().all(|q| !q.is_empty()) {
            let start = Instant::now();
            let round: Vec<Job<B>> = queued.iter_mut().filter_map(VecDeque::pop_front).collect();
            let results: Vec<Result<Done<B>, TrainError>> = match run(all_replicas, &mut sum, round) {
                Ok((flats, device_s)) => {
                    let seconds = device_s.unwrap_or_else(|| start.elapsed().as_secs_f64());
                    let span = (start, Instant::now());
                    flats.into_iter().map(|flat| Ok(Done { flat, seconds, span })).collect()
                }
                Err(e) => done.iter().map(|_| Err(copy(&e))).collect(),
            };
            for (to, result) in done.iter().zip(results) {
                if to.send(result).is_err() {
                    return;
                }
            }
        }
    }
}

/// One job of every replica of this process, summed (or averaged) across
/// all `all_replicas`: one flat tensor for each replica, on its device, and the
/// collective's seconds on the device where it timed them.
fn run<B: Backend>(
    all_replicas: usize,
    sum: &mut Summer,
    round: Vec<Job<B>>,
) -> Result<(Vec<Tensor<B, 1>>, Option<f64>), TrainError> {
    let n = all_replicas as f32;
    let Some(op) = round.first().map(|j| j.op) else { return Ok((Vec::new(), None)) };
    match sum {
        Summer::Host(sum) => {
            let mut devices = Vec::with_capacity(round.len());
            let mut values: Vec<f32> = Vec::new();
            for Job { parts, device, .. } in round {
                let own =
                    Tensor::cat(parts, 0).into_data().convert::<f32>().into_vec::<f32>().map_err(|e| {
                        TrainError::Backend(format!("cannot read the values to all-reduce: {e:?}"))
                    })?;
                if values.is_empty() {
                    values = own;
                } else if values.len() == own.len() {
                    values.iter_mut().zip(own).for_each(|(v, o)| *v += o);
                } else {
                    return Err(TrainError::Backend(format!(
                        "the replicas of this process sent buffers of {} and {} values to one all-reduce",
                        values.len(),
                        own.len()
                    )));
                }
                devices.push(device);
            }
            sum.sum(&mut values)?;
            if op == ReduceOperation::Mean {
                values.iter_mut().for_each(|v| *v /= n);
            }
            let total = values.len();
            let flats = devices
                .iter()
                .map(|device| Tensor::from_data(TensorData::new(values.clone(), [total]), device))
                .collect();
            Ok((flats, None))
        }
        Summer::Device(sum) => {
            let mut flats = Vec::with_capacity(round.len());
            let mut device_s = Some(0.0);
            for Job { parts, .. } in round {
                let mut primitive = Tensor::cat(parts, 0).into_primitive().tensor();
                let seconds = sum.sum(&mut primitive)?;
                device_s = device_s.zip(seconds).map(|(a, b)| a + b);
                let summed = Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(primitive));
                flats.push(if op == ReduceOperation::Mean { summed.div_scalar(n) } else { summed });
            }
            Ok((flats, device_s))
        }
    }
}

/// `flat` cut back into consecutive parts of `lens` values.
pub(super) fn split<B: Backend>(flat: &Tensor<B, 1>, lens: Vec<usize>) -> Vec<Tensor<B, 1>> {
    let mut at = 0;
    lens.into_iter()
        .map(|len| {
            at += len;
            flat.clone().narrow(0, at - len, len)
        })
        .collect()
}
