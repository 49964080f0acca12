//! Peak resident memory of this process: the kernel's high-water mark
//! (`VmHWM` in `/proc/self/status`), which covers every thread, the
//! sandboxed plugins' linear memories and the backend's host allocations.
//! Where the system does not say, the figure is absent; reading it never fails a run.
//! A cell may also be held under a resident-memory limit.

/// This process's peak resident memory so far, in MiB.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_hwm(&status)
}

/// This process's resident memory now, in MiB.
pub fn rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_kib(&status, "VmRSS:")
}

/// `VmHWM:  123456 kB` in a `/proc/<pid>/status` text, in MiB.
fn parse_hwm(status: &str) -> Option<f64> {
    parse_kib(status, "VmHWM:")
}

/// The line `key  123456 kB` of a `/proc/<pid>/status` text, in MiB.
fn parse_kib(status: &str, key: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kib: f64 = line.trim_start_matches(key).trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib / 1024.0)
}

/// Stop this process, with `say_why` told the reason, once its resident
/// memory passes `limit_mib`: a watcher thread reads it every 20 ms. An
/// error when the thread cannot start, so that no limit goes unenforced.
pub fn enforce_limit(limit_mib: u64, say_why: impl FnOnce(String) + Send + 'static) -> std::io::Result<()> {
    std::thread::Builder::new().name("benchkit-memory-limit".into()).spawn(move || loop {
        if let Some(rss) = rss_mib().filter(|&m| m > limit_mib as f64) {
            say_why(format!(
                "out of memory: the cell process's resident memory reached {rss:.0} MiB, past its limit of {limit_mib} MiB (train.memory_limit_mib)"
            ));
            std::process::exit(3);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn reads_the_high_water_mark_and_grows_with_what_is_touched() {
        assert_eq!(parse_hwm("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t1024 kB\n"), Some(2.0));
        assert_eq!(parse_hwm("Name:\tx\n"), None);
        assert_eq!(parse_kib("VmHWM:\t  2048 kB\nVmRSS:\t1024 kB\n", "VmRSS:"), Some(1.0));
        // Linux always has /proc/self/status: no reading is a failure, not a skip.
        let before = peak_rss_mib().expect("VmHWM in /proc/self/status");
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        let after = peak_rss_mib().expect("readable once");
        assert!(after >= before + 60.0, "{before} -> {after} MiB after touching 64 MiB");
    }
}
