//! CPU time this process has spent, every thread together.

/// What the system says this process has used so far, every thread together.
fn usage() -> Option<libc::rusage> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole `rusage` into the pointer it is given.
    unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
            return None;
        }
        Some(usage.assume_init())
    }
}

/// Seconds of CPU this process has used so far, user and system; `None`
/// where the system does not say.
pub fn process_cpu_s() -> Option<f64> {
    let usage = usage()?;
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Some(seconds(usage.ru_utime) + seconds(usage.ru_stime))
}

/// Bytes in a page of memory (4096 where the system does not say).
pub fn page_bytes() -> u64 {
    // SAFETY: sysconf only reads a system setting.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

/// Minor page faults this process has taken so far (pages it touched for
/// the first time since they were mapped: fresh memory the kernel zeroes);
/// 0 where the system does not say.
pub fn minor_faults() -> u64 {
    usage().map_or(0, |u| u64::try_from(u.ru_minflt).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_time_grows_with_work() {
        let before = super::process_cpu_s().unwrap();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(super::process_cpu_s().unwrap() > before);
    }

    #[test]
    fn fresh_memory_touched_is_counted_in_page_faults() {
        let before = super::minor_faults();
        // 64 MiB, mapped fresh and touched a page at a time.
        let mut pages = vec![0u8; 64 << 20];
        for i in (0..pages.len()).step_by(4096) {
            pages[i] = 1;
        }
        std::hint::black_box(&pages);
        assert!(super::minor_faults() >= before + 8_000, "{} then {}", before, super::minor_faults());
    }
}
