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

/// Every process this one started, and theirs.
fn descendants() -> Vec<u32> {
    let mut found = Vec::new();
    let mut pending = children("self");
    while let Some(pid) = pending.pop() {
        pending.extend(children(&pid.to_string()));
        found.push(pid);
    }
    found
}

/// The resident memory of processes `pids`, in MiB; one that has exited holds nothing.
fn rss_of_mib(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|status| parse_kib(&status, "VmRSS:"))
        .sum()
}

/// The processes each thread of `pid` started (`/proc/<pid>/task/<tid>/children`).
fn children(pid: &str) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| list.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<u32>>())
        .collect()
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

/// Ticks of the watcher between two searches for new child processes.
const RESCAN_TICKS: u32 = 25;

/// Stop this process, with `say_why` told the reason, once its resident
/// memory and its children's pass `limit_mib`: a watcher thread reads
/// them every 20 ms, and looks for new children every half second.
/// Children are started to die with this process. An error when the
/// thread cannot start, so that no limit goes unenforced.
pub fn enforce_limit(limit_mib: u64, say_why: impl FnOnce(String) + Send + 'static) -> std::io::Result<()> {
    let mut known = Vec::new();
    let mut tick = 0u32;
    std::thread::Builder::new().name("benchkit-memory-limit".into()).spawn(move || loop {
        if tick.is_multiple_of(RESCAN_TICKS) {
            known = descendants();
        }
        tick = tick.wrapping_add(1);
        if let Some(rss) = rss_mib().map(|own| own + rss_of_mib(&known)).filter(|&m| m > limit_mib as f64) {
            say_why(format!(
                "out of memory: the cell process's resident memory (with its children's) reached {rss:.0} MiB, past its limit of {limit_mib} MiB (train.memory_limit_mib)"
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
        // Other tests of this process allocate and free beside this one, so
        // the peak is compared with what is resident now, not with the peak
        // before, and the block is large enough to stand out.
        let status = || std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let resident = parse_kib(&status(), "VmRSS:").expect("VmRSS in /proc/self/status");
        let block = vec![1u8; 256 << 20];
        std::hint::black_box(&block);
        let after = peak_rss_mib().expect("VmHWM in /proc/self/status");
        assert!(
            after >= resident + 200.0,
            "{resident} MiB resident -> peak {after} MiB after touching 256 MiB"
        );
    }

    /// A child's memory counts toward the tree's: a process holding
    /// 128 MiB adds about that much while it lives.
    #[test]
    #[cfg(target_os = "linux")]
    fn the_tree_counts_what_children_hold() {
        let script = "b = bytearray(128 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('ready', flush=True)\nimport sys; sys.stdin.read()";
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        let children = rss_of_mib(&descendants());
        drop(child.stdin.take());
        child.wait().unwrap();
        assert!(children >= 120.0, "{children} MiB in children, one of them holding 128 MiB");
    }
}
