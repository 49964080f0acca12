//! When a device has really finished a step's backward pass, and the
//! exposed communication measured from there. A GPU queues its kernels: the
//! host returns from `backward()` long before the device is done, so a
//! clock started there would charge the still-running backward kernels to
//! the first wait on a gradient bucket. The fence waits for the compute
//! stream alone (never for the collective's), so buckets already sent keep
//! travelling while it waits.

use crate::train::TrainError;
use burn::tensor::backend::Backend;
use std::time::Instant;

/// The seconds a step waited for its gradients after the device finished
/// its backward pass: `exposed = max(0, t_reduced − t_backward)`, where
/// `t_backward` is when the device's compute stream finished the backward
/// pass and `t_reduced` when the last averaged gradient was on the device,
/// both on one clock. Communication done before the backward pass ended
/// was hidden behind it, and exposes nothing.
pub fn exposed_s(backward_end_s: f64, reduced_s: f64) -> f64 {
    (reduced_s - backward_end_s).max(0.0)
}

/// Wait until `device` has run the work queued on its compute stream so
/// far, and say when: `None` on a device that computes as the host calls
/// it (the CPU backends), where the host's own clock is already the
/// device's, and on LibTorch built without its native operations (no
/// stream to wait for alone: the host's clock, as before, rather than a
/// device synchronisation that would wait for the collective too). On
/// burn-cuda the device is synchronised: the all-reduce that follows must
/// wait for the backward pass's gradients anyway.
pub(crate) fn compute_done<B: Backend>(device: &B::Device) -> Result<Option<Instant>, TrainError>
where
    B::Device: 'static,
{
    let any: &dyn std::any::Any = device;
    #[cfg(feature = "tch")]
    if let Some(burn::backend::libtorch::LibTorchDevice::Cuda(index)) =
        any.downcast_ref::<burn::backend::libtorch::LibTorchDevice>()
    {
        if !burn::backend::libtorch::stream::AVAILABLE {
            return Ok(None);
        }
        burn::backend::libtorch::stream::wait_current(*index).map_err(|e| {
            TrainError::Backend(format!("waiting for GPU {index}'s backward pass failed: {e}"))
        })?;
        return Ok(Some(Instant::now()));
    }
    #[cfg(feature = "cuda")]
    if any.is::<burn::backend::cuda::CudaDevice>() {
        B::sync(device)
            .map_err(|e| TrainError::Backend(format!("waiting for the backward pass failed: {e:?}")))?;
        return Ok(Some(Instant::now()));
    }
    let _ = any;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU step whose host returned from `backward()` at 10 ms, whose
    /// device finished the backward pass at 100 ms and had the last
    /// averaged bucket at 105 ms waited 5 ms for communication; a clock
    /// started at the host's return would read 95 ms, and call the step
    /// all-reduce bound.
    #[test]
    fn exposed_communication_starts_when_the_device_ends_backward() {
        let (host_return, device_backward, reduced) = (0.010, 0.100, 0.105);
        assert!((exposed_s(device_backward, reduced) - 0.005).abs() < 1e-12);
        assert!((exposed_s(host_return, reduced) - 0.095).abs() < 1e-12, "the old clock");
        // Every bucket done while the backward pass still ran: nothing exposed.
        assert_eq!(exposed_s(device_backward, 0.090), 0.0);
    }

    #[test]
    fn a_cpu_device_needs_no_fence() {
        let done = compute_done::<burn::backend::Flex>(&burn::backend::flex::FlexDevice).unwrap();
        assert!(done.is_none());
    }
}
