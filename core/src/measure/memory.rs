//! Peak resident memory of this process: the kernel's high-water mark
//! (`VmHWM` in `/proc/self/status`), which covers every thread, the
//! sandboxed plugins' linear memories and the backend's host allocations.
//! Where the system does not say, the figure is absent; reading it never fails a run.

/// This process's peak resident memory so far, in MiB.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_hwm(&status)
}

/// `VmHWM:  123456 kB` in a `/proc/<pid>/status` text, in MiB.
fn parse_hwm(status: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_high_water_mark_and_grows_with_what_is_touched() {
        assert_eq!(parse_hwm("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t1024 kB\n"), Some(2.0));
        assert_eq!(parse_hwm("Name:\tx\n"), None);
        if let Some(before) = peak_rss_mib() {
            let block = vec![1u8; 64 << 20];
            std::hint::black_box(&block);
            let after = peak_rss_mib().expect("readable once");
            assert!(after >= before + 60.0, "{before} -> {after} MiB after touching 64 MiB");
        }
    }
}
