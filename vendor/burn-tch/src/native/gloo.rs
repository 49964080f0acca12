//! Gloo all-reduces through PyTorch's c10d (`c10d_gloo.cpp`), compiled
//! where gloo's headers were found beside LibTorch's.

use std::ffi::{CStr, CString, c_char, c_int};

#[repr(C)]
struct RawGroup {
    _private: [u8; 0],
}

#[repr(C)]
struct RawWork {
    _private: [u8; 0],
}

unsafe extern "C" {
    fn burn_tch_gloo_new(
        out: *mut *mut RawGroup,
        store_host: *const c_char,
        store_port: c_int,
        host: *const c_char,
        rank: c_int,
        size: c_int,
        timeout_ms: i64,
    ) -> *mut c_char;
    fn burn_tch_gloo_free(group: *mut RawGroup);
    fn burn_tch_gloo_all_reduce(
        out: *mut *mut RawWork,
        group: *mut RawGroup,
        data: *mut f32,
        count: i64,
    ) -> *mut c_char;
    fn burn_tch_gloo_wait(work: *mut RawWork) -> *mut c_char;
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

/// One rank's membership of a Gloo process group.
pub struct GlooGroup {
    raw: *mut RawGroup,
}

// SAFETY: c10d's process group is used from one thread at a time here, and
// may move between threads.
unsafe impl Send for GlooGroup {}

/// An all-reduce under way over a buffer it borrows until waited for.
pub struct GlooWork<'a> {
    raw: *mut RawWork,
    _buffer: std::marker::PhantomData<&'a mut [f32]>,
}

impl GlooGroup {
    /// Join the group of `size` ranks meeting at rank 0's store on
    /// `store_host:store_port`, this rank's transport listening on `host`.
    pub fn new(
        store_host: &str,
        store_port: u16,
        host: &str,
        rank: usize,
        size: usize,
        timeout: std::time::Duration,
    ) -> Result<Self, String> {
        let text = |s: &str| CString::new(s).map_err(|_| format!("{s:?} has a NUL byte"));
        let (store_host, host) = (text(store_host)?, text(host)?);
        let int = |v: usize, what: &str| c_int::try_from(v).map_err(|_| format!("{what} {v} is too large"));
        let mut raw = std::ptr::null_mut();
        // SAFETY: the strings outlive the call; `raw` receives an owned group.
        let error = unsafe {
            burn_tch_gloo_new(
                &mut raw,
                store_host.as_ptr(),
                c_int::from(store_port),
                host.as_ptr(),
                int(rank, "rank")?,
                int(size, "world size")?,
                i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX),
            )
        };
        take(error)?;
        Ok(Self { raw })
    }

    /// Start summing `buffer` across the ranks, in place.
    pub fn start<'a>(&mut self, buffer: &'a mut [f32]) -> Result<GlooWork<'a>, String> {
        let count = i64::try_from(buffer.len()).map_err(|_| "the buffer is too large".to_string())?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: the buffer is borrowed mutably until the work is waited for (or dropped, which waits).
        let error = unsafe { burn_tch_gloo_all_reduce(&mut raw, self.raw, buffer.as_mut_ptr(), count) };
        take(error)?;
        Ok(GlooWork { raw, _buffer: std::marker::PhantomData })
    }

    /// Sum `buffer` across the ranks, in place.
    pub fn all_reduce(&mut self, buffer: &mut [f32]) -> Result<(), String> {
        self.start(buffer)?.wait()
    }
}

impl Drop for GlooGroup {
    fn drop(&mut self) {
        // SAFETY: made by burn_tch_gloo_new, freed once.
        unsafe { burn_tch_gloo_free(self.raw) };
    }
}

impl GlooWork<'_> {
    /// Wait until the all-reduce is done.
    pub fn wait(mut self) -> Result<(), String> {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        // SAFETY: made by burn_tch_gloo_all_reduce, waited for and freed once.
        take(unsafe { burn_tch_gloo_wait(raw) })
    }
}

impl Drop for GlooWork<'_> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // The buffer must not be released while Gloo still writes to it.
            // SAFETY: as in `wait`.
            let _ = take(unsafe { burn_tch_gloo_wait(self.raw) });
        }
    }
}
