//! Whether this machine can train on CUDA, asked of the driver library
//! itself before burn touches it: burn-cuda panics on a device thread when
//! the driver or the GPU is missing, which would end the cell without a
//! clear reason.

use libloading::{Library, Symbol};
use std::ffi::{c_char, c_int, c_uint, CStr};

/// The CUDA driver library of this platform.
pub const DRIVER: &str = if cfg!(windows) { "nvcuda.dll" } else { "libcuda.so.1" };

/// What a CUresult means, for the codes a machine without a usable GPU returns.
fn meaning(code: c_int) -> &'static str {
    match code {
        3 => "the driver is not initialised",
        34 => "this is the CUDA stub library, not a driver",
        35 => "the driver is older than the CUDA runtime needs",
        46 => "the GPUs are busy or unavailable (exclusive compute mode?)",
        100 => "no CUDA-capable GPU is visible (check CUDA_VISIBLE_DEVICES)",
        101 => "an invalid device ordinal",
        999 => "an unknown driver error",
        _ => "see the CUDA driver API's CUresult",
    }
}

/// The names of the first `wanted` GPUs the CUDA driver in `library`
/// sees, or why it cannot give them.
pub fn probe_with(library: &str, wanted: usize) -> Result<Vec<String>, String> {
    let fix = "install the NVIDIA driver, or train on backend = \"flex\"";
    // SAFETY: loading the CUDA driver runs only its own initialisers.
    let lib = unsafe { Library::new(library) }
        .map_err(|e| format!("no CUDA driver: {library} cannot be loaded ({e}); {fix}"))?;
    type Init = unsafe extern "C" fn(c_uint) -> c_int;
    type Count = unsafe extern "C" fn(*mut c_int) -> c_int;
    type Get = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
    type Name = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;
    // SAFETY: the symbols are the CUDA driver API's, with its C signatures;
    // every pointer handed over points at live memory of the stated size.
    unsafe {
        let symbol = |name: &str| format!("{library} is not a CUDA driver: it has no {name}");
        let init: Symbol<Init> = lib.get(b"cuInit\0").map_err(|_| symbol("cuInit"))?;
        let count: Symbol<Count> = lib.get(b"cuDeviceGetCount\0").map_err(|_| symbol("cuDeviceGetCount"))?;
        let get: Symbol<Get> = lib.get(b"cuDeviceGet\0").map_err(|_| symbol("cuDeviceGet"))?;
        let name: Symbol<Name> = lib.get(b"cuDeviceGetName\0").map_err(|_| symbol("cuDeviceGetName"))?;
        let code = init(0);
        if code != 0 {
            return Err(format!("the CUDA driver did not start: CUresult {code}, {}; {fix}", meaning(code)));
        }
        let mut n: c_int = 0;
        let code = count(&mut n);
        if code != 0 || n <= 0 {
            let why = if code != 0 { meaning(code) } else { meaning(100) };
            return Err(format!("the CUDA driver sees no GPU: {why}; {fix}"));
        }
        let n = n as usize;
        if wanted > n {
            return Err(format!(
                "devices = {wanted}, but the CUDA driver sees {n} GPU(s); lower `devices` to at most {n}"
            ));
        }
        let mut names = Vec::with_capacity(wanted);
        for ordinal in 0..wanted {
            let mut device: c_int = 0;
            let mut buf = [0 as c_char; 256];
            let named = get(&mut device, ordinal as c_int) == 0 && name(buf.as_mut_ptr(), 256, device) == 0;
            names.push(if named {
                CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
            } else {
                format!("GPU {ordinal}")
            });
        }
        Ok(names)
    }
}

/// The CUDA driver's version as `MAJOR.MINOR` (e.g. "12.8"), or "unknown".
pub fn driver_version() -> String {
    type Version = unsafe extern "C" fn(*mut c_int) -> c_int;
    // SAFETY: as in `probe_with`: the driver's own cuDriverGetVersion, given live memory.
    unsafe {
        let Ok(lib) = Library::new(DRIVER) else { return "unknown".into() };
        let Ok(get) = lib.get::<Version>(b"cuDriverGetVersion\0") else { return "unknown".into() };
        let mut v: c_int = 0;
        if get(&mut v) != 0 || v <= 0 {
            return "unknown".into();
        }
        format!("{}.{}", v / 1000, (v % 1000) / 10)
    }
}

/// [`probe_with`] the platform's driver.
pub fn probe(wanted: usize) -> Result<Vec<String>, String> {
    probe_with(DRIVER, wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_driver_is_named_with_the_fix() {
        let e = probe_with("libcuda-absent.so.1", 1).unwrap_err();
        assert!(e.starts_with("no CUDA driver: libcuda-absent.so.1 cannot be loaded"), "{e}");
        assert!(e.contains("backend = \"flex\""), "{e}");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_library_that_is_not_a_driver_is_refused() {
        let e = probe_with("libc.so.6", 1).unwrap_err();
        assert_eq!(e, "libc.so.6 is not a CUDA driver: it has no cuInit");
    }

    #[test]
    fn this_machine_either_lists_its_gpus_or_says_why_not() {
        let has_driver = std::path::Path::new("/proc/driver/nvidia/gpus").exists();
        match probe(1) {
            Ok(names) => {
                assert!(has_driver, "a GPU without /proc/driver/nvidia: {names:?}");
                assert_eq!(names.len(), 1);
            }
            Err(e) => assert!(!has_driver || e.contains("CUDA"), "{e}"),
        }
        let e = probe(10_000).unwrap_err();
        assert!(e.contains("CUDA"), "{e}");
    }
}
