#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![allow(clippy::single_range_in_vec_init)]

//! Burn Tch Backend

mod backend;
mod element;
#[cfg(native_ops)]
mod native;
mod ops;
mod tensor;

/// Sum all-reduces between processes over Gloo, through PyTorch's c10d,
/// where this build found gloo's headers ([`gloo::AVAILABLE`]).
pub mod gloo {
    #[cfg(c10d_gloo)]
    pub use crate::native::gloo::{GlooGroup, GlooWork};
    #[cfg(not(c10d_gloo))]
    pub use crate::no_gloo::{GlooGroup, GlooWork};

    /// Whether this build has Gloo.
    pub const AVAILABLE: bool = cfg!(c10d_gloo);
}
#[cfg(not(c10d_gloo))]
mod no_gloo;

/// Sum all-reduces of CUDA tensors between processes over NCCL, through
/// PyTorch's c10d, where this build found a CUDA LibTorch and CUDA's
/// headers ([`nccl::AVAILABLE`]).
pub mod nccl {
    #[cfg(c10d_nccl)]
    pub use crate::native::nccl::{NcclGroup, NcclWork};
    #[cfg(not(c10d_nccl))]
    pub use crate::no_nccl::{NcclGroup, NcclWork};

    /// Whether this build has NCCL.
    pub const AVAILABLE: bool = cfg!(c10d_nccl);
}
#[cfg(not(c10d_nccl))]
mod no_nccl;

/// Batch normalisation's backward by LibTorch's own kernel, where this
/// build compiled `src/native` against LibTorch's headers ([`batch_norm::AVAILABLE`]).
pub mod batch_norm {
    /// Whether this build has LibTorch's batch-norm backward.
    pub const AVAILABLE: bool = cfg!(native_ops);

    /// The gradients of the input, weight and bias of a training-mode batch
    /// normalisation of `input` (`[N, C, ...]`) by `weight` (`[C]`), from
    /// the batch mean and inverse standard deviation `native_batch_norm`
    /// saved; an error where LibTorch refuses, or this build lacks it.
    pub fn backward(
        grad_output: &tch::Tensor,
        input: &tch::Tensor,
        weight: &tch::Tensor,
        save_mean: &tch::Tensor,
        save_invstd: &tch::Tensor,
        eps: f64,
    ) -> Result<[tch::Tensor; 3], String> {
        #[cfg(native_ops)]
        return crate::native::batch_norm_backward(grad_output, input, weight, save_mean, save_invstd, eps);
        #[cfg(not(native_ops))]
        {
            let _ = (grad_output, input, weight, save_mean, save_invstd, eps);
            Err("this burn-tch was built without LibTorch's headers (src/native)".into())
        }
    }
}

/// SGD's update by LibTorch's fused multi-tensor kernel, where this build
/// compiled `src/native` against LibTorch's headers ([`sgd::AVAILABLE`]).
pub mod sgd {
    /// Whether this build has LibTorch's fused SGD.
    pub const AVAILABLE: bool = cfg!(native_ops);

    /// One step, in place, over every parameter at once: each gradient
    /// plus `weight_decay` times its parameter, folded into its momentum
    /// buffer (`momenta`: one per parameter, or none for plain SGD), the
    /// parameter moved by `lr` against the result, with Nesterov's
    /// look-ahead where asked; as `torch.optim.SGD(fused=True)` with no
    /// dampening. An error where LibTorch refuses, or this build lacks it.
    pub fn fused_step(
        params: &[tch::Tensor],
        grads: &[tch::Tensor],
        momenta: &[tch::Tensor],
        weight_decay: f64,
        momentum: f64,
        lr: f64,
        nesterov: bool,
    ) -> Result<(), String> {
        #[cfg(native_ops)]
        return crate::native::fused_sgd(params, grads, momenta, weight_decay, momentum, lr, nesterov);
        #[cfg(not(native_ops))]
        {
            let _ = (params, grads, momenta, weight_decay, momentum, lr, nesterov);
            Err("this burn-tch was built without LibTorch's headers (src/native)".into())
        }
    }
}

/// A CUDA device's compute stream waited for alone, where this build
/// compiled `src/native` against LibTorch's headers ([`stream::AVAILABLE`]).
pub mod stream {
    /// Whether this build can wait for one stream.
    pub const AVAILABLE: bool = cfg!(native_ops);

    /// Block until the work queued so far on CUDA device `device`'s current
    /// stream (where this backend computes) is done, leaving the device's
    /// other streams (a collective's) running, as a device synchronisation
    /// would not.
    pub fn wait_current(device: usize) -> Result<(), String> {
        #[cfg(native_ops)]
        return crate::native::cuda_stream_wait(device);
        #[cfg(not(native_ops))]
        {
            let _ = device;
            Err("this burn-tch was built without LibTorch's headers (src/native)".into())
        }
    }
}

/// Set the threads LibTorch's CPU kernels compute with, in this process.
pub fn set_num_threads(threads: usize) {
    tch::set_num_threads(i32::try_from(threads).unwrap_or(i32::MAX));
}

/// The tch crate this backend's tensors are made of.
pub use tch;

pub use backend::*;
pub use element::*;
pub use tensor::*;
