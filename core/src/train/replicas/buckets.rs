//! Gradient buckets all-reduced while the backward pass runs, as PyTorch
//! DDP does. The trainable parameters, in reverse module order (about the
//! order the backward pass finishes their gradients), are packed into
//! buckets of at most `distributed.bucket_mib` of the bytes they carry on
//! the wire (as DDP's `bucket_cap_mb`), the first of at most 1 MiB so that
//! the all-reduce starts early (DDP's first bucket); a parameter
//! larger than its bucket has one of its own. burn's autodiff hands each parameter's
//! gradient out as soon as it is final; a bucket goes to the all-reduce
//! thread once all of its gradients are in and every bucket before it has
//! gone, so every rank sends the same buckets in the same order. Gradients
//! the backward pass did not hand out are taken after it; a bucket sent
//! with a gradient that changed after its hand-out is sent again.

use super::comm::{Job, JobSender, ThreadLink};
use crate::model::GraphNet;
use crate::train::TrainError;
use burn::backend::autodiff::watch::{self, GradientSink};
use burn::collective::ReduceOperation;
use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Shape, Tensor, TensorPrimitive};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// The first bucket's largest size, as PyTorch DDP's.
const FIRST_BUCKET_BYTES: usize = 1 << 20;

/// Consecutive ranges of `lens` holding at most `first` values in the
/// first range and `cap` in each other; a part larger than that alone in
/// its own range.
pub(crate) fn bucket_ranges(lens: &[usize], first: usize, cap: usize) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let (mut start, mut held) = (0, 0);
    for (i, &len) in lens.iter().enumerate() {
        let limit = if ranges.is_empty() { first } else { cap };
        if held > 0 && held + len > limit {
            ranges.push(start..i);
            (start, held) = (i, 0);
        }
        held += len;
    }
    if start < lens.len() {
        ranges.push(start..lens.len());
    }
    ranges
}

/// A parameter's place in its bucket.
#[derive(Clone, Debug)]
struct Member {
    param: ParamId,
    len: usize,
}

/// Which bucket each trainable parameter travels in.
#[derive(Debug)]
pub(crate) struct BucketPlan {
    buckets: Vec<Vec<Member>>,
    /// Bytes a value takes on the wire.
    value_bytes: usize,
    places: HashMap<ParamId, (usize, usize)>,
}

impl BucketPlan {
    /// `model`'s trainable parameters in reverse module order, in buckets
    /// of at most `cap_bytes` (the first at most 1 MiB) at `value_bytes` a
    /// value on the wire.
    pub(crate) fn of<B: Backend>(model: &GraphNet<B>, cap_bytes: usize, value_bytes: usize) -> Self {
        struct Collect(Vec<Member>);
        impl<B: Backend> ModuleVisitor<B> for Collect {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
                if param.is_require_grad() {
                    self.0.push(Member { param: param.id, len: param.shape().num_elements() });
                }
            }
        }
        let mut collect = Collect(Vec::new());
        model.visit(&mut collect);
        let mut members = collect.0;
        members.reverse();
        let lens: Vec<usize> = members.iter().map(|m| m.len).collect();
        let value_bytes = value_bytes.max(1);
        let cap = (cap_bytes / value_bytes).max(1);
        let first = cap.min(FIRST_BUCKET_BYTES / value_bytes);
        let buckets: Vec<Vec<Member>> =
            bucket_ranges(&lens, first, cap).into_iter().map(|r| members[r].to_vec()).collect();
        let places = buckets
            .iter()
            .enumerate()
            .flat_map(|(b, members)| members.iter().enumerate().map(move |(s, m)| (m.param, (b, s))))
            .collect();
        Self { buckets, value_bytes, places }
    }

    /// Each bucket's bytes on the wire, in the order they are sent.
    pub(crate) fn bytes(&self) -> Vec<usize> {
        self.buckets.iter().map(|b| self.value_bytes * b.iter().map(|m| m.len).sum::<usize>()).collect()
    }
}

/// What a step's buckets cost: the all-reduce thread's seconds on them
/// (overlapped or not), and when the device finished the backward pass
/// (where it runs behind the host).
pub(super) struct Exchanged {
    pub(super) grads: GradientsParams,
    pub(super) communication_s: f64,
    pub(super) backward_done: Option<Instant>,
    /// Each bucket's all-reduce on the thread, in the order sent.
    pub(super) buckets: Vec<crate::train::records::timeline::BucketSpan>,
}

/// A step's buckets while its backward pass runs.
pub(super) struct InFlight<B: Backend> {
    pending: Arc<Mutex<Pending<B>>>,
}

struct Pending<B: Backend> {
    plan: Arc<BucketPlan>,
    slots: Vec<Vec<Option<Tensor<B, 1>>>>,
    filled: Vec<usize>,
    /// The first bucket not sent yet.
    next: usize,
    /// The bucket of every job sent, in order.
    sent: Vec<usize>,
    stale: Vec<bool>,
    jobs: JobSender<B>,
    device: Option<B::Device>,
    error: Option<TrainError>,
}

impl<B: Backend> Pending<B> {
    fn put(&mut self, bucket: usize, slot: usize, values: Tensor<B, 1>) {
        self.device.get_or_insert_with(|| values.device());
        if self.slots[bucket][slot].replace(values).is_some() {
            self.stale[bucket] |= bucket < self.next;
            return;
        }
        self.filled[bucket] += 1;
        while self.next < self.slots.len() && self.filled[self.next] == self.slots[self.next].len() {
            self.send(self.next);
            self.next += 1;
        }
    }

    fn send(&mut self, bucket: usize) {
        let (Some(device), None) = (self.device.clone(), &self.error) else {
            return;
        };
        let parts = self.slots[bucket].iter().flatten().cloned().collect();
        match self.jobs.send(Job { parts, op: ReduceOperation::Mean, device }) {
            Ok(()) => self.sent.push(bucket),
            Err(_) => self.error = Some(TrainError::Backend("the all-reduce thread has stopped".into())),
        }
    }
}

struct Sink<B: Backend> {
    pending: Arc<Mutex<Pending<B>>>,
    /// Node id to bucket and slot, for this step's parameter tensors.
    nodes: HashMap<u64, (usize, usize)>,
}

impl<B: Backend> GradientSink<B> for Sink<B> {
    fn ready(&mut self, id: u64, gradient: FloatTensor<B>) {
        let Some(&(bucket, slot)) = self.nodes.get(&id) else {
            return;
        };
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let len = pending.plan.buckets[bucket][slot].len;
        let flat = B::float_reshape(gradient, Shape::new([len]));
        pending.put(bucket, slot, Tensor::from_primitive(TensorPrimitive::Float(flat)));
    }
}

/// Arm the hand-out of `model`'s gradients for the backward pass this
/// thread runs next. Where the backend is not burn's autodiff, nothing is
/// handed out and every bucket goes after the pass.
pub(super) fn arm<B: AutodiffBackend>(
    plan: &Arc<BucketPlan>,
    model: &GraphNet<B>,
    link: &ThreadLink<B::InnerBackend>,
) -> Result<InFlight<B::InnerBackend>, TrainError> {
    struct Nodes<'a> {
        places: &'a HashMap<ParamId, (usize, usize)>,
        nodes: HashMap<u64, (usize, usize)>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Nodes<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let Some(&place) = self.places.get(&param.id) else {
                return;
            };
            let primitive = param.val().into_primitive().tensor();
            if let Some(node) = watch::node_id::<B::InnerBackend>(&primitive) {
                self.nodes.insert(node, place);
            }
        }
    }
    let pending = Arc::new(Mutex::new(Pending {
        plan: plan.clone(),
        slots: plan.buckets.iter().map(|b| vec![None; b.len()]).collect(),
        filled: vec![0; plan.buckets.len()],
        next: 0,
        sent: Vec::new(),
        stale: vec![false; plan.buckets.len()],
        jobs: link.sender()?,
        device: None,
        error: None,
    }));
    let mut nodes = Nodes { places: &plan.places, nodes: HashMap::new() };
    model.visit(&mut nodes);
    if !nodes.nodes.is_empty() {
        let ids = nodes.nodes.keys().copied().collect();
        watch::on_ready::<B::InnerBackend>(
            ids,
            Box::new(Sink { pending: pending.clone(), nodes: nodes.nodes }),
        );
    }
    Ok(InFlight { pending })
}

impl<I: Backend> InFlight<I> {
    /// After the backward pass: send the buckets still to go, wait for the
    /// device to finish the backward pass (`fence`), then for every bucket,
    /// and put the averaged gradients in place of `grads`'.
    pub(super) fn finish<B: AutodiffBackend<InnerBackend = I>>(
        self,
        link: &ThreadLink<I>,
        model: &GraphNet<B>,
        mut grads: GradientsParams,
        fence: impl FnOnce() -> Result<Option<Instant>, TrainError>,
    ) -> Result<Exchanged, TrainError> {
        watch::clear();
        let mut guard = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let pending = &mut *guard;
        model.visit(&mut TakeRest::<B> { grads: &grads, pending });
        for bucket in 0..pending.slots.len() {
            if pending.stale[bucket] {
                pending.send(bucket);
            }
        }
        if let Some(e) = pending.error.take() {
            return Err(e);
        }
        let backward_done = fence()?;
        let mut averaged: Vec<Option<Tensor<I, 1>>> = vec![None; pending.slots.len()];
        let mut communication_s = 0.0;
        let bytes = pending.plan.bytes();
        let mut spans = Vec::with_capacity(pending.sent.len());
        for &bucket in &pending.sent {
            let done = link.wait()?;
            communication_s += done.seconds;
            spans.push(crate::train::records::timeline::BucketSpan {
                bucket,
                start: done.span.0,
                end: done.span.1,
                bytes: bytes.get(bucket).copied().unwrap_or(0) as u64,
            });
            averaged[bucket] = Some(done.flat);
        }
        let mut parts = HashMap::new();
        for (bucket, members) in pending.plan.buckets.iter().enumerate() {
            let Some(flat) = averaged[bucket].take() else { continue };
            let lens = members.iter().map(|m| m.len).collect();
            for (member, part) in members.iter().zip(super::comm::split(&flat, lens)) {
                parts.insert(member.param, part);
            }
        }
        model.visit(&mut PutBack::<B> { grads: &mut grads, parts });
        Ok(Exchanged { grads, communication_s, backward_done, buckets: spans })
    }
}

/// Fill the slots the backward pass left empty: from `grads`, or zeros
/// for a parameter without a gradient (so every rank's buckets keep their
/// layout); then send every bucket still to go.
struct TakeRest<'a, B: AutodiffBackend> {
    grads: &'a GradientsParams,
    pending: &'a mut Pending<B::InnerBackend>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for TakeRest<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let Some(&(bucket, slot)) = self.pending.plan.places.get(&param.id) else {
            return;
        };
        if self.pending.slots[bucket][slot].is_some() {
            return;
        }
        let len = self.pending.plan.buckets[bucket][slot].len;
        let values = match self.grads.get::<B::InnerBackend, D>(param.id) {
            Some(grad) => grad.reshape([len]),
            None => Tensor::zeros([len], &param.device()),
        };
        self.pending.put(bucket, slot, values);
    }
}

/// Put each averaged part in place of the local gradient it came from; a
/// parameter without a local gradient stays without one.
struct PutBack<'a, B: AutodiffBackend> {
    grads: &'a mut GradientsParams,
    parts: HashMap<ParamId, Tensor<B::InnerBackend, 1>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for PutBack<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let Some(part) = self.parts.remove(&param.id) else { return };
        if self.grads.remove::<B::InnerBackend, D>(param.id).is_some() {
            let grad: Tensor<B::InnerBackend, D> = part.reshape(param.shape());
            self.grads.register(param.id, grad);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_at_most_the_cap_and_a_larger_part_goes_alone() {
        assert_eq!(bucket_ranges(&[3, 3, 3, 3], 6, 6), [0..2, 2..4]);
        assert_eq!(bucket_ranges(&[2, 10, 2, 2], 6, 6), [0..1, 1..2, 2..4]);
        assert_eq!(bucket_ranges(&[10], 6, 6), vec![Range { start: 0, end: 1 }]);
        assert_eq!(bucket_ranges(&[], 6, 6), Vec::<Range<usize>>::new());
        // The first bucket has its own, smaller, cap.
        assert_eq!(bucket_ranges(&[3, 3, 3, 3, 3], 3, 9), [0..1, 1..4, 4..5]);
        // Thousands of tiny parts: full buckets, the last one with the rest.
        let tiny = vec![1; 5000];
        let ranges = bucket_ranges(&tiny, 64, 64);
        assert_eq!(ranges.len(), 79);
        assert!(ranges[..78].iter().all(|r| r.len() == 64));
        assert_eq!(ranges[78], 4992..5000);
    }
}
