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
    fn burn_tch_batch_norm_backward(
        out: *mut *mut C_tensor,
        grad_output: *const C_tensor,
        input: *const C_tensor,
        weight: *const C_tensor,
        save_mean: *const C_tensor,
        save_invstd: *const C_tensor,
        eps: f64,
    ) -> *mut c_char;
    fn burn_tch_fused_sgd(
        params: *const *const C_tensor,
        grads: *const *const C_tensor,
        momenta: *const *const C_tensor,
        n: usize,
        weight_decay: f64,
        momentum: f64,
        lr: f64,
        nesterov: c_int,
    ) -> *mut c_char;
    fn burn_tch_cuda_stream_wait(device: c_int) -> *mut c_char;
}

/// Block until the work queued so far on CUDA device `device`'s current
/// stream is done, leaving its other streams running.
pub fn cuda_stream_wait(device: usize) -> Result<(), String> {
    let device = c_int::try_from(device).map_err(|_| format!("no CUDA device {device}"))?;
    // SAFETY: no pointer goes in; the error, if any, is taken once.
    let error = unsafe { burn_tch_cuda_stream_wait(device) };
    if error.is_null() {
        return Ok(());
    }
    // SAFETY: a string from strdup, not used after.
    Err(unsafe { take_error(error) })
}

/// The message behind a shim's error pointer, which is freed here.
///
/// # Safety
/// `error` is a NUL-terminated string from strdup, not used after this call.
unsafe fn take_error(error: *mut c_char) -> String {
    // SAFETY: as the caller promises.
    let message = unsafe { CStr::from_ptr(error) }.to_string_lossy().into_owned();
    unsafe { libc::free(error.cast()) };
    message
}

/// LibTorch's backward of a training-mode batch normalisation of `input`
/// (`[N, C, ...]`) scaled by `weight` (`[C]`), from the batch mean and
/// inverse standard deviation its forward (`native_batch_norm`) saved: the
/// gradients of the input, the weight and the bias.
pub fn batch_norm_backward(
    grad_output: &tch::Tensor,
    input: &tch::Tensor,
    weight: &tch::Tensor,
    save_mean: &tch::Tensor,
    save_invstd: &tch::Tensor,
    eps: f64,
) -> Result<[tch::Tensor; 3], String> {
    let mut out = [std::ptr::null_mut(); 3];
    // SAFETY: the tensors outlive the call, which only reads them; `out`
    // has room for three tensors.
    let error = unsafe {
        burn_tch_batch_norm_backward(
            out.as_mut_ptr(),
            grad_output.as_ptr(),
            input.as_ptr(),
            weight.as_ptr(),
            save_mean.as_ptr(),
            save_invstd.as_ptr(),
            eps,
        )
    };
    if !error.is_null() {
        // SAFETY: the shim's strdup'd message, taken once.
        return Err(unsafe { take_error(error) });
    }
    // SAFETY: each pointer was made by `new at::Tensor` and is owned from here on.
    Ok(out.map(|ptr| unsafe { tch::Tensor::from_ptr(ptr) }))
}

/// LibTorch's fused SGD step (`_fused_sgd_`), in place on `params` and
/// `momenta` (one per parameter, or none for plain SGD).
pub fn fused_sgd(
    params: &[tch::Tensor],
    grads: &[tch::Tensor],
    momenta: &[tch::Tensor],
    weight_decay: f64,
    momentum: f64,
    lr: f64,
    nesterov: bool,
) -> Result<(), String> {
    if grads.len() != params.len() || !(momenta.is_empty() || momenta.len() == params.len()) {
        return Err(format!(
            "{} parameters, {} gradients and {} momentum buffers do not pair up",
            params.len(),
            grads.len(),
            momenta.len()
        ));
    }
    let pointers = |tensors: &[tch::Tensor]| tensors.iter().map(|t| t.as_ptr()).collect::<Vec<_>>();
    let (p, g, m) = (pointers(params), pointers(grads), pointers(momenta));
    let m = if momenta.is_empty() { std::ptr::null() } else { m.as_ptr() };
    // SAFETY: every pointer is a live tensor for the call; `p` and `g` hold
    // `params.len()` of them, `m` as many or is null.
    let error = unsafe {
        burn_tch_fused_sgd(p.as_ptr(), g.as_ptr(), m, params.len(), weight_decay, momentum, lr, nesterov as c_int)
    };
    if !error.is_null() {
        // SAFETY: the shim's strdup'd message, taken once.
        return Err(unsafe { take_error(error) });
    }
    Ok(())
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
        // SAFETY: the shim's strdup'd message, taken once.
        let message = unsafe { take_error(error) };
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
