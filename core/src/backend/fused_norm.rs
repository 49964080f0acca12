//! Training-mode batch normalisation as LibTorch's two kernels (forward
//! and backward, each a statistics pass and an elementwise pass) instead of
//! the dozen separate passes burn composes it from, for a cell on
//! `Autodiff<LibTorch>`. The backward is a node of burn's autodiff graph
//! like any other: its gradients reach the same `Gradients`, so bucketed
//! all-reduces see them as they come. Every other backend, and a LibTorch
//! built without `vendor/burn-tch`'s native kernels, keeps the composed
//! form (the model's `norm` module), against which `core/tests/it/tch.rs` checks
//! this one.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// Running statistics (`[C]` each) and the momentum that moves them.
pub struct Running<B: Backend> {
    pub mean: Tensor<B, 1>,
    pub var: Tensor<B, 1>,
    pub momentum: f64,
}

/// A normalised `[N, C, L]` batch, and the running statistics it moved.
pub type Normalised<B> = (Tensor<B, 3>, Option<Running<B>>);

/// `x` (`[batch, C, positions]`) normalised by its batch statistics, scaled
/// by `gamma` and shifted by `beta` (both `[C]`), with `running` moved
/// towards the batch mean and biased variance by its momentum (detached);
/// `None` where the backend has no fused form or LibTorch refuses the
/// input, and the caller composes one.
pub fn batch_norm_train<B: Backend>(
    x: &Tensor<B, 3>,
    gamma: &Tensor<B, 1>,
    beta: &Tensor<B, 1>,
    epsilon: f64,
    running: Option<&Running<B>>,
) -> Option<Normalised<B>> {
    #[cfg(feature = "tch")]
    {
        use burn::tensor::{bf16, f16};
        if let Some(done) = libtorch::on::<B, f32>(x, gamma, beta, epsilon, running) {
            return Some(done);
        }
        if let Some(done) = libtorch::on::<B, bf16>(x, gamma, beta, epsilon, running) {
            return Some(done);
        }
        if let Some(done) = libtorch::on::<B, f16>(x, gamma, beta, epsilon, running) {
            return Some(done);
        }
    }
    let _ = (x, gamma, beta, epsilon, running);
    None
}

#[cfg(feature = "tch")]
mod libtorch {
    use super::{Normalised, Running};
    use burn::backend::autodiff::checkpoint::base::Checkpointer;
    use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
    use burn::backend::autodiff::grads::Gradients;
    use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
    use burn::backend::autodiff::NodeId;
    use burn::backend::libtorch::{batch_norm, tch, LibTorch, TchElement, TchTensor};
    use burn::backend::Autodiff;
    use burn::tensor::backend::Backend;
    use burn::tensor::{Tensor, TensorPrimitive};
    use std::any::Any;

    type Ad<E> = Autodiff<LibTorch<E>>;

    /// `value` as a `U`, where `T` is `U`.
    fn cast<T: Any, U: Any + Clone>(value: &T) -> Option<U> {
        (value as &dyn Any).downcast_ref::<U>().cloned()
    }

    /// The fused batch norm where `B` is `Autodiff<LibTorch<E>>`.
    pub(super) fn on<B: Backend, E: TchElement>(
        x: &Tensor<B, 3>,
        gamma: &Tensor<B, 1>,
        beta: &Tensor<B, 1>,
        epsilon: f64,
        running: Option<&Running<B>>,
    ) -> Option<Normalised<B>> {
        if !batch_norm::AVAILABLE {
            return None;
        }
        let x: Tensor<Ad<E>, 3> = cast(x)?;
        let gamma: Tensor<Ad<E>, 1> = cast(gamma)?;
        let beta: Tensor<Ad<E>, 1> = cast(beta)?;
        let running = match running {
            Some(r) => Some(recast(r)?),
            None => None,
        };
        let (y, moved) = forward(x, gamma, beta, epsilon, running)?;
        let moved = match moved {
            Some(r) => Some(recast(&r)?),
            None => None,
        };
        Some((cast(&y)?, moved))
    }

    /// Running statistics of backend `T` as `U`'s, where `T` is `U`.
    fn recast<T: Backend, U: Backend>(r: &Running<T>) -> Option<Running<U>> {
        Some(Running { mean: cast(&r.mean)?, var: cast(&r.var)?, momentum: r.momentum })
    }

    /// The node's backward: LibTorch's kernel, from the input and the
    /// statistics the forward saved.
    #[derive(Debug)]
    struct BatchNormBackward;

    /// The input's checkpoint, gamma, the saved mean and inverse standard
    /// deviation, and epsilon.
    type Saved = (NodeId, TchTensor, TchTensor, TchTensor, f64);

    impl<E: TchElement> Backward<LibTorch<E>, 3> for BatchNormBackward {
        type State = Saved;

        fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, checkpointer: &mut Checkpointer) {
            let [x_parent, gamma_parent, beta_parent] = ops.parents;
            let grad = grads.consume::<LibTorch<E>>(&ops.node);
            let (x_state, gamma, mean, invstd, epsilon) = ops.state;
            let x: TchTensor = checkpointer.retrieve_node_output(x_state);
            let computed = batch_norm::backward(
                &grad.tensor,
                &x.tensor,
                &gamma.tensor,
                &mean.tensor,
                &invstd.tensor,
                epsilon,
            );
            // The forward ran LibTorch's kernel on these very tensors: a
            // refusal now is a broken invariant, not bad input.
            let [dx, dgamma, dbeta] =
                computed.unwrap_or_else(|e| panic!("LibTorch batch-norm backward: {e}"));
            for (parent, g) in [(x_parent, dx), (gamma_parent, dgamma), (beta_parent, dbeta)] {
                if let Some(node) = parent {
                    grads.register::<LibTorch<E>>(node.id, TchTensor::new(g));
                }
            }
        }
    }

    fn forward<E: TchElement>(
        x: Tensor<Ad<E>, 3>,
        gamma: Tensor<Ad<E>, 1>,
        beta: Tensor<Ad<E>, 1>,
        epsilon: f64,
        running: Option<Running<Ad<E>>>,
    ) -> Option<Normalised<Ad<E>>> {
        let (x, gamma, beta) =
            (x.into_primitive().tensor(), gamma.into_primitive().tensor(), beta.into_primitive().tensor());
        // What LibTorch refuses (one value a channel, say) the composed form computes.
        let (y, mean, invstd) = x
            .primitive
            .tensor
            .f_native_batch_norm(
                Some(&gamma.primitive.tensor),
                Some(&beta.primitive.tensor),
                None::<&tch::Tensor>,
                None::<&tch::Tensor>,
                true,
                0.0,
                epsilon,
            )
            .ok()?;
        // Running statistics move towards the batch mean and biased
        // variance, as the composed form moves them: one LibTorch call each.
        let moved = running.map(|r| {
            let lerp = |state: Tensor<Ad<E>, 1>, batch: &tch::Tensor| {
                let state = state.inner().into_primitive().tensor().tensor;
                let next = TchTensor::new(state.lerp(&batch.to_kind(state.kind()), r.momentum));
                Tensor::<Ad<E>, 1>::from_inner(Tensor::from_primitive(TensorPrimitive::Float(next)))
            };
            let var = invstd.pow_tensor_scalar(-2.0) - epsilon;
            Running { mean: lerp(r.mean, &mean), var: lerp(r.var, &var), momentum: r.momentum }
        });
        let y = TchTensor::new(y);
        let parents = [x.node.clone(), gamma.node.clone(), beta.node.clone()];
        let prep = <BatchNormBackward as Backward<LibTorch<E>, 3>>::prepare::<NoCheckpointing>(
            BatchNormBackward,
            parents,
        );
        let out = match prep.compute_bound().stateful() {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let saved: Saved =
                    (x_state, gamma.primitive.clone(), TchTensor::new(mean), TchTensor::new(invstd), epsilon);
                prep.finish(saved, y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        };
        Some((Tensor::from_primitive(TensorPrimitive::Float(out)), moved))
    }
}
