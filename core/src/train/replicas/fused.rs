//! The fused all-reduce and what stands on it: parameters numbered alike in
//! every replica, all of a step's gradients averaged in one collective call,
//! rank 0's parameters adopted by every process, and the fingerprint that
//! shows the replicas agree. Nothing here knows about threads or orders.

use super::comm::{split, ThreadLink};
use crate::model::GraphNet;
use crate::train::TrainError;
use burn::collective::{self, CollectiveError, PeerId, ReduceOperation};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorPrimitive};

/// How a replica's all-reduces (of tensors on `B`) reach the others.
pub(crate) enum Link<B: Backend> {
    /// burn-collective: this process's replicas and, through them, the other processes'.
    Burn(PeerId),
    /// One replica per process, the processes joined by Gloo or NCCL
    /// behind this process's all-reduce thread.
    Thread(ThreadLink<B>),
}

/// Number the parameters in module order. burn draws random ids; numbered,
/// a parameter has the same id in every replica of every process, as the
/// fused all-reduce has the same place for it.
pub(super) fn number_params<B: Backend>(model: GraphNet<B>) -> GraphNet<B> {
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

/// Bytes of all trainable parameters at `value_bytes` a value: what each
/// replica's all-reduce carries per step.
pub(crate) fn gradient_bytes<B: Backend>(model: &GraphNet<B>, value_bytes: usize) -> usize {
    struct Count(usize);
    impl<B: Backend> ModuleVisitor<B> for Count {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if param.is_require_grad() {
                self.0 += param.shape().num_elements();
            }
        }
    }
    let mut count = Count(0);
    model.visit(&mut count);
    count.0 * value_bytes
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
                        self.0 = crate::hash::fnv1a_extend(self.0, &v.to_bits().to_le_bytes());
                    }
                }
                Err(e) => self.1 = Some(format!("cannot read a parameter back to fingerprint it: {e:?}")),
            }
        }
    }
    let mut hash = Hash(crate::hash::FNV_OFFSET, None);
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
pub(super) fn reduce_fused<B: Backend>(
    link: &mut Link<B>,
    parts: Vec<Tensor<B, 1>>,
    op: ReduceOperation,
    processes: usize,
) -> Result<Vec<Tensor<B, 1>>, TrainError> {
    let id = match link {
        Link::Burn(id) => *id,
        Link::Thread(host) => return host.reduce(parts, op),
    };
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
    // A server gone mid-call is another process gone: a transient failure.
    let flat = collective::all_reduce::<B>(id, flat, op).map_err(|e| match e {
        CollectiveError::LocalServerMissing if processes > 1 => TrainError::LostPeer(format!(
            "the all-reduce across {processes} processes broke off: another process died, or a peer became unreachable"
        )),
        e => TrainError::Backend(format!("the all-reduce failed: {e:?}")),
    })?;
    let flat = Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(flat));
    Ok(split(&flat, lens))
}

fn flat<B: Backend, const D: usize>(tensor: Tensor<B, D>) -> Tensor<B, 1> {
    let n = tensor.shape().num_elements();
    tensor.reshape([n])
}

/// Average the gradients of every replica of every process, fused into one all-reduce.
pub(super) fn reduce_gradients<B: AutodiffBackend>(
    link: &mut Link<B::InnerBackend>,
    model: &GraphNet<B>,
    mut grads: GradientsParams,
    processes: usize,
) -> Result<GradientsParams, TrainError> {
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
    let parts = reduce_fused(link, parts, ReduceOperation::Mean, processes)?;
    model.visit(&mut Put::<B> {
        grads: &mut grads,
        ids: ids.into_iter().peekable(),
        parts: parts.into_iter(),
    });
    Ok(grads)
}

/// Replace every parameter with the first peer's: the others send zeros
/// to a sum, which leaves the first peer's values exact.
pub(super) fn adopt_first<B: AutodiffBackend>(
    link: &mut Link<B::InnerBackend>,
    first: bool,
    model: GraphNet<B>,
    processes: usize,
) -> Result<GraphNet<B>, TrainError> {
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
    let parts = reduce_fused(link, own.parts, ReduceOperation::Sum, processes)?;
    Ok(model.map(&mut Adopt::<B> { parts: parts.into_iter() }))
}

/// How many peers share the all-reduce: a sum of ones.
pub(super) fn collective_peers<B: Backend>(
    model: &GraphNet<B>,
    link: &mut Link<B>,
    processes: usize,
) -> Result<usize, TrainError> {
    let device = model.devices().into_iter().next().unwrap_or_default();
    let one = Tensor::<B, 1>::ones([1], &device);
    let n = Tensor::cat(reduce_fused(link, vec![one], ReduceOperation::Sum, processes)?, 0).into_scalar();
    Ok(burn::tensor::ElementConversion::elem::<f32>(n).round() as usize)
}
