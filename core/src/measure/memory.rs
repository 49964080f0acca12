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

/// The resident memory of this process and every process it started
/// (a PyTorch cell's Python, say), now, in MiB.
pub fn tree_rss_mib() -> Option<f64> {
    Some(rss_mib()? + descendants_rss_mib())
}

/// The resident memory of every process this one started, and theirs, in MiB.
fn descendants_rss_mib() -> f64 {
    let mut total = 0.0;
    let mut pending = children("self");
    while let Some(pid) = pending.pop() {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { continue };
        // A process that has just exited has no VmRSS line: it holds nothing.
        total += parse_kib(&status, "VmRSS:").unwrap_or(0.0);
        pending.extend(children(&pid.to_string()));
    }
    total
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

/// Stop this process, with `say_why` told the reason, once its resident
/// memory and its children's pass `limit_mib`: a watcher thread reads
/// them every 20 ms. Children are started to die with this process. An
/// error when the thread cannot start, so that no limit goes unenforced.
pub fn enforce_limit(limit_mib: u64, say_why: impl FnOnce(String) + Send + 'static) -> std::io::Result<()> {
    std::thread::Builder::new().name("benchkit-memory-limit".into()).spawn(move || loop {
        if let Some(rss) = tree_rss_mib().filter(|&m| m > limit_mib as f64) {
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
        let before = peak_rss_mib().expect("VmHWM in /proc/self/status");
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        let after = peak_rss_mib().expect("readable once");
        assert!(after >= before + 60.0, "{before} -> {after} MiB after touching 64 MiB");
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
        let children = descendants_rss_mib();
        drop(child.stdin.take());
        child.wait().unwrap();
        assert!(children >= 120.0, "{children} MiB in children, one of them holding 128 MiB");
    }
}
