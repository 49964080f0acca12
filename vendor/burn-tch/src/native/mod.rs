//! LibTorch operations tch does not bind, compiled by the build script
//! against the same LibTorch headers.

#[cfg(c10d_gloo)]
pub mod gloo;
#[cfg(c10d_nccl)]
pub mod nccl;

use burn_backend::ops::ConvOptions;
use std::ffi::{CStr, c_char, c_int};
use torch_sys::C_tensor;

unsafe extern "C" {
    fn burn_tch_convolution_backward(
        out: *mut *mut C_tensor,
        grad_output: *const C_tensor,
        input: *const C_tensor,
        weight: *const C_tensor,
        stride: *const i64,
        padding: *const i64,
        dilation: *const i64,
        dims: c_int,
        groups: i64,
        mask: c_int,
    ) -> *mut c_char;
}

/// Which gradients [`convolution_backward`] computes.
pub const INPUT: c_int = 1;
pub const WEIGHT: c_int = 2;

/// LibTorch's backward of a convolution (cuDNN, oneDNN or its own kernels,
/// as its forward would choose): the gradients `mask` asks for, in the order
/// input, weight, bias.
pub fn convolution_backward<const N: usize>(
    grad_output: &tch::Tensor,
    input: &tch::Tensor,
    weight: &tch::Tensor,
    options: &ConvOptions<N>,
    mask: c_int,
) -> [Option<tch::Tensor>; 3] {
    let ints = |values: [usize; N]| values.map(|v| v as i64);
    let (stride, padding, dilation) =
        (ints(options.stride), ints(options.padding), ints(options.dilation));
    let mut out = [std::ptr::null_mut(); 3];
    // SAFETY: the tensors outlive the call, which only reads them; the
    // integer arrays hold `N` values each; `out` has room for three tensors.
    let error = unsafe {
        burn_tch_convolution_backward(
            out.as_mut_ptr(),
            grad_output.as_ptr(),
            input.as_ptr(),
            weight.as_ptr(),
            stride.as_ptr(),
            padding.as_ptr(),
            dilation.as_ptr(),
            N as c_int,
            options.groups as i64,
            mask,
        )
    };
    if !error.is_null() {
        // SAFETY: a NUL-terminated string from strdup, freed once here.
        let message = unsafe { CStr::from_ptr(error) }.to_string_lossy().into_owned();
        unsafe { libc::free(error.cast()) };
        panic!("LibTorch convolution backward: {message}");
    }
    let mut k = 0;
    out.map(|ptr| {
        let wanted = mask & (1 << k) != 0;
        k += 1;
        // SAFETY: each pointer was made by `new at::Tensor` and is owned from here on.
        let tensor = unsafe { tch::Tensor::from_ptr(ptr) };
        wanted.then_some(tensor)
    })
}
