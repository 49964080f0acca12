//! SGD's update as LibTorch's one fused multi-tensor kernel (`_fused_sgd_`,
//! what `torch.optim.SGD(fused=True)` runs) instead of the seven tensor
//! operations a parameter burn composes it from, for a cell on
//! `Autodiff<LibTorch>`. Parameters and momentum buffers are updated in
//! place. Every other backend keeps burn's `Sgd` (the step loop's optimizer
//! picks), against which `core/tests/it/tch.rs` checks this one.

use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;

/// SGD's settings: momentum (0 for none, no dampening), Nesterov's
/// look-ahead, and weight decay added to each gradient.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdSettings {
    pub momentum: f64,
    pub nesterov: bool,
    pub weight_decay: f64,
}

/// The fused optimizer's state: each parameter's momentum buffer.
#[derive(Default)]
pub struct Momenta {
    #[cfg(feature = "tch")]
    buffers: std::collections::HashMap<burn::module::ParamId, libtorch::Buffer>,
}

/// Whether a cell on `B` takes the fused step.
pub fn applies<B: AutodiffBackend>() -> bool {
    #[cfg(feature = "tch")]
    {
        use burn::tensor::{bf16, f16};
        if burn::backend::libtorch::sgd::AVAILABLE
            && (libtorch::is::<B, f32>() || libtorch::is::<B, bf16>() || libtorch::is::<B, f16>())
        {
            return true;
        }
    }
    false
}

/// One step of `module` against `grads` at learning rate `lr`, its
/// parameters updated in place; for a `B` that [`applies`].
///
/// # Panics
/// Where `B` does not apply, or LibTorch refuses the tensors its own
/// backward made: broken invariants, not bad input.
pub fn step<B: AutodiffBackend, M: AutodiffModule<B>>(
    settings: SgdSettings,
    lr: f64,
    module: M,
    grads: &mut GradientsParams,
    momenta: &mut Momenta,
) -> M {
    #[cfg(feature = "tch")]
    {
        use burn::tensor::{bf16, f16};
        if libtorch::is::<B, f32>() {
            return libtorch::step::<B, M, f32>(settings, lr, module, grads, momenta);
        }
        if libtorch::is::<B, bf16>() {
            return libtorch::step::<B, M, bf16>(settings, lr, module, grads, momenta);
        }
        if libtorch::is::<B, f16>() {
            return libtorch::step::<B, M, f16>(settings, lr, module, grads, momenta);
        }
    }
    let _ = (settings, lr, module, grads, momenta);
    panic!("the fused SGD step was asked of a backend it does not apply to")
}

#[cfg(feature = "tch")]
mod libtorch {
    use super::{Momenta, SgdSettings};
    use burn::backend::libtorch::{sgd, tch, LibTorch, TchElement, TchTensor};
    use burn::backend::Autodiff;
    use burn::module::{AutodiffModule, ModuleMapper, Param, ParamId};
    use burn::optim::GradientsParams;
    use burn::tensor::backend::AutodiffBackend;
    use burn::tensor::{Tensor, TensorPrimitive};
    use std::any::{Any, TypeId};

    type Ad<E> = Autodiff<LibTorch<E>>;

    /// A momentum buffer: a LibTorch tensor this optimizer alone holds.
    pub(super) struct Buffer(tch::Tensor);

    pub(super) fn is<B: 'static, E: TchElement>() -> bool {
        TypeId::of::<B>() == TypeId::of::<Ad<E>>()
    }

    /// `value` as a `U`, where `T` is `U`.
    fn cast<T: Any, U: Any>(value: T) -> U {
        match (Box::new(value) as Box<dyn Any>).downcast::<U>() {
            Ok(u) => *u,
            Err(_) => panic!("the fused SGD step met a tensor of another backend"),
        }
    }

    pub(super) fn step<B: AutodiffBackend, M: AutodiffModule<B>, E: TchElement>(
        settings: SgdSettings,
        lr: f64,
        module: M,
        grads: &mut GradientsParams,
        momenta: &mut Momenta,
    ) -> M {
        let mut gather = Gather::<E> {
            grads,
            params: Vec::new(),
            grad_list: Vec::new(),
            ids: Vec::new(),
            _e: Default::default(),
        };
        let module = module.map(&mut gather);
        let Gather { params, grad_list, ids, .. } = gather;
        let buffers: Vec<tch::Tensor> = if settings.momentum == 0.0 {
            Vec::new()
        } else {
            // A new buffer starts at zero: with no dampening, its first
            // update makes it the gradient, as burn's and PyTorch's first step do.
            ids.iter()
                .zip(&params)
                .map(|(id, p)| {
                    momenta.buffers.entry(*id).or_insert_with(|| Buffer(p.zeros_like())).0.shallow_clone()
                })
                .collect()
        };
        let done = sgd::fused_step(
            &params,
            &grad_list,
            &buffers,
            settings.weight_decay,
            settings.momentum,
            lr,
            settings.nesterov,
        );
        if let Err(e) = done {
            panic!("LibTorch's fused SGD step: {e}");
        }
        module
    }

    /// Takes each parameter's gradient out of `grads` and collects the
    /// LibTorch tensors to update: the parameter's own storage where
    /// nothing else holds it, else a copy the module takes instead.
    struct Gather<'a, E> {
        grads: &'a mut GradientsParams,
        params: Vec<tch::Tensor>,
        grad_list: Vec<tch::Tensor>,
        ids: Vec<ParamId>,
        _e: std::marker::PhantomData<E>,
    }

    impl<B: AutodiffBackend, E: TchElement> ModuleMapper<B> for Gather<'_, E> {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, tensor, mapper) = param.consume();
            let Some(grad) = self.grads.remove::<B::InnerBackend, D>(id) else {
                return Param::from_mapped_value(id, tensor, mapper);
            };
            let require_grad = tensor.is_require_grad();
            let tensor: Tensor<Ad<E>, D> = cast(tensor);
            let grad: Tensor<LibTorch<E>, D> = cast(grad);
            let mut inner: TchTensor = tensor.inner().into_primitive().tensor();
            if !inner.storage.can_mut() || !inner.tensor.is_contiguous() {
                inner = TchTensor::new(inner.tensor.contiguous().copy());
            }
            self.params.push(inner.tensor.shallow_clone());
            self.grad_list.push(grad.into_primitive().tensor().tensor.contiguous());
            self.ids.push(id);
            let mut tensor =
                Tensor::<Ad<E>, D>::from_inner(Tensor::from_primitive(TensorPrimitive::Float(inner)));
            if require_grad {
                tensor = tensor.require_grad();
            }
            Param::from_mapped_value(id, cast(tensor), mapper)
        }
    }
}
