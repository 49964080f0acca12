//! NCCL all-reduces through PyTorch's c10d (`c10d_nccl.cpp`), compiled
//! where CUDA's and NCCL's headers were found beside a CUDA LibTorch's.

use std::ffi::{CStr, CString, c_char, c_int};
use torch_sys::C_tensor;

#[repr(C)]
struct RawGroup {
    _private: [u8; 0],
}

#[repr(C)]
struct RawWork {
    _private: [u8; 0],
}

unsafe extern "C" {
    fn burn_tch_nccl_new(
        out: *mut *mut RawGroup,
        store_host: *const c_char,
        store_port: c_int,
        rank: c_int,
        size: c_int,
        timeout_ms: i64,
    ) -> *mut c_char;
    fn burn_tch_nccl_free(group: *mut RawGroup);
    fn burn_tch_nccl_all_reduce(
        out: *mut *mut RawWork,
        group: *mut RawGroup,
        tensor: *const C_tensor,
    ) -> *mut c_char;
    fn burn_tch_nccl_wait(work: *mut RawWork, group: *mut RawGroup, device_ms: *mut f32) -> *mut c_char;
    fn burn_tch_nccl_all_reduce_n(group: *mut RawGroup, tensor: *const C_tensor, n: i64) -> *mut c_char;
}

/// The message of a C++ error, freed.
fn take(error: *mut c_char) -> Result<(), String> {
    if error.is_null() {
        return Ok(());
    }
    // SAFETY: a NUL-terminated string from strdup, freed once here.
    let message = unsafe { CStr::from_ptr(error) }.to_string_lossy().into_owned();
    unsafe { libc::free(error.cast()) };
    Err(message)
}

/// One rank's membership of an NCCL process group.
pub struct NcclGroup {
    raw: *mut RawGroup,
}

// SAFETY: c10d's process group is used from one thread at a time here, and
// may move between threads.
unsafe impl Send for NcclGroup {}

/// An all-reduce under way over a tensor it borrows, with its group, until waited for.
pub struct NcclWork<'a> {
    raw: *mut RawWork,
    group: *mut RawGroup,
    _tensor: std::marker::PhantomData<&'a mut tch::Tensor>,
}

impl NcclGroup {
    /// Join the group of `size` ranks meeting at rank 0's store on
    /// `store_host:store_port`. NCCL's communicator is made at the first
    /// all-reduce, on the device of its tensor.
    pub fn new(
        store_host: &str,
        store_port: u16,
        rank: usize,
        size: usize,
        timeout: std::time::Duration,
    ) -> Result<Self, String> {
        let store_host =
            CString::new(store_host).map_err(|_| format!("{store_host:?} has a NUL byte"))?;
        let int = |v: usize, what: &str| c_int::try_from(v).map_err(|_| format!("{what} {v} is too large"));
        let mut raw = std::ptr::null_mut();
        // SAFETY: the string outlives the call; `raw` receives an owned group.
        let error = unsafe {
            burn_tch_nccl_new(
                &mut raw,
                store_host.as_ptr(),
                c_int::from(store_port),
                int(rank, "rank")?,
                int(size, "world size")?,
                i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX),
            )
        };
        take(error)?;
        Ok(Self { raw })
    }

    /// Start summing `tensor` (contiguous, on a CUDA device) across the ranks, in place.
    pub fn start<'a>(&'a mut self, tensor: &'a mut tch::Tensor) -> Result<NcclWork<'a>, String> {
        if !tensor.is_contiguous() {
            return Err("NCCL sums contiguous tensors only".into());
        }
        let mut raw = std::ptr::null_mut();
        // SAFETY: the tensor is borrowed mutably until the work is waited for (or dropped, which waits).
        let error = unsafe { burn_tch_nccl_all_reduce(&mut raw, self.raw, tensor.as_ptr()) };
        take(error)?;
        Ok(NcclWork { raw, group: self.raw, _tensor: std::marker::PhantomData })
    }

    /// Sum `tensor` across the ranks, in place, and wait until it is done:
    /// the collective's seconds on its stream, where c10d timed them.
    pub fn all_reduce(&mut self, tensor: &mut tch::Tensor) -> Result<Option<f64>, String> {
        self.start(tensor)?.wait()
    }

    /// Sum `tensor` across the ranks `n` times, in place, queued back to
    /// back on the collective's stream (nccl-tests' timed loop), and wait
    /// until the last is done.
    pub fn all_reduce_repeated(&mut self, tensor: &mut tch::Tensor, n: usize) -> Result<(), String> {
        if !tensor.is_contiguous() {
            return Err("NCCL sums contiguous tensors only".into());
        }
        let n = i64::try_from(n).map_err(|_| format!("{n} all-reduces are too many"))?;
        // SAFETY: the tensor is borrowed mutably for the call, which returns once every all-reduce is done.
        take(unsafe { burn_tch_nccl_all_reduce_n(self.raw, tensor.as_ptr(), n) })
    }
}

impl Drop for NcclGroup {
    fn drop(&mut self) {
        // SAFETY: made by burn_tch_nccl_new, freed once.
        unsafe { burn_tch_nccl_free(self.raw) };
    }
}

impl NcclWork<'_> {
    /// Wait until the sum is on the device, at most the group's timeout:
    /// the collective's seconds on its stream, where c10d timed them.
    pub fn wait(mut self) -> Result<Option<f64>, String> {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        let mut device_ms = f32::NAN;
        // SAFETY: made by burn_tch_nccl_all_reduce, waited for and freed
        // once; the group outlives its works (they borrow its tensor).
        take(unsafe { burn_tch_nccl_wait(raw, self.group, &mut device_ms) })?;
        Ok(device_ms.is_finite().then(|| f64::from(device_ms) / 1e3))
    }
}

impl Drop for NcclWork<'_> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // The tensor must not be released while NCCL still writes to it.
            // SAFETY: as in `wait`.
            let _ = take(unsafe { burn_tch_nccl_wait(self.raw, self.group, std::ptr::null_mut()) });
        }
    }
}
