//! Facts about the machine and build that every result carries.

pub use benchkit_schema::Environment;

/// Now, in milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The UTC calendar date and time of Unix time `ms`: year, month, day,
/// hour, minute, second (proleptic Gregorian; Howard Hinnant's
/// days-to-civil).
pub fn utc(ms: i64) -> [i64; 6] {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    [year, month, day, rem / 3600, rem % 3600 / 60, rem % 60]
}

/// GPU model names and driver version from the NVIDIA kernel driver, if loaded.
fn nvidia() -> (Vec<String>, Option<String>) {
    let driver = field(&read("/proc/driver/nvidia/version"), "NVRM version", ':').map(|v| {
        v.split_whitespace()
            .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .unwrap_or(v)
            .to_string()
    });
    let mut gpus: Vec<String> = std::fs::read_dir("/proc/driver/nvidia/gpus")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| {
                    field(&read(&e.path().join("information").to_string_lossy()), "Model", ':')
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    gpus.sort();
    (gpus, driver)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn field<'a>(text: &'a str, key: &str, sep: char) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(sep)?;
        (k.trim() == key).then(|| v.trim().trim_matches('"'))
    })
}

/// What tells this machine's kernel from another's: the boot id, which
/// every container and namespace on one kernel shares (unlike the
/// hostname), else the hostname.
pub fn machine_id() -> String {
    let boot = read("/proc/sys/kernel/random/boot_id");
    if boot.trim().is_empty() {
        read("/proc/sys/kernel/hostname").trim().to_string()
    } else {
        boot.trim().to_string()
    }
}

/// The name this machine gives itself.
pub fn hostname() -> String {
    read("/proc/sys/kernel/hostname").trim().to_string()
}

/// This machine's memory in bytes (`MemTotal`), if it can be read.
pub fn machine_memory_bytes() -> Option<u64> {
    let kib: u64 = field(&read("/proc/meminfo"), "MemTotal", ':')?.split_whitespace().next()?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// The lowest memory limit, in bytes, of this process's cgroup and its
/// ancestors, where one is set: cgroup v2's `memory.max`, or v1's
/// `memory.limit_in_bytes` (below 2^60; v1 writes "no limit" as a number
/// near 2^63). A container or a batch job is held to it, whatever the
/// machine has.
pub fn cgroup_memory_limit_bytes() -> Option<u64> {
    cgroup_limit(&read("/proc/self/cgroup"), &|path| std::fs::read_to_string(path).ok())
}

/// [`cgroup_memory_limit_bytes`] from `/proc/self/cgroup`'s text, reading
/// the cgroup files through `read`.
fn cgroup_limit(cgroups: &str, read: &dyn Fn(&str) -> Option<String>) -> Option<u64> {
    const NO_LIMIT: u64 = 1 << 60;
    let mut lowest: Option<u64> = None;
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let (root, file) = if controllers.is_empty() {
            ("/sys/fs/cgroup", "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")
        } else {
            continue;
        };
        // The cgroup itself, then each ancestor up to the root. A path
        // outside this namespace's tree (`/../…`) names no directory here:
        // only the root is read.
        let parts: Vec<&str> = match path.split('/').any(|p| p == "..") {
            true => Vec::new(),
            false => path.split('/').filter(|p| !p.is_empty() && *p != ".").collect(),
        };
        for depth in (0..=parts.len()).rev() {
            let dir = parts[..depth].iter().fold(root.to_string(), |d, p| format!("{d}/{p}"));
            let limit = read(&format!("{dir}/{file}")).and_then(|t| t.trim().parse::<u64>().ok());
            if let Some(l) = limit.filter(|&l| l > 0 && l < NO_LIMIT) {
                lowest = Some(lowest.map_or(l, |low| low.min(l)));
            }
        }
    }
    lowest
}

/// The environment of this process.
pub fn detect() -> Environment {
    let cpuinfo = read("/proc/cpuinfo");
    let meminfo = read("/proc/meminfo");
    let os_release = read("/etc/os-release");
    let mem_kib: f64 = field(&meminfo, "MemTotal", ':')
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let (gpus, gpu_driver) = nvidia();
    Environment {
        benchkit_version: env!("CARGO_PKG_VERSION").into(),
        git_commit: env!("BENCHKIT_GIT_COMMIT").into(),
        burn_version: env!("BENCHKIT_BURN_VERSION").into(),
        wasmtime_version: env!("BENCHKIT_WASMTIME_VERSION").into(),
        plugin_contract: crate::plugin::CONTRACT_VERSION.into(),
        os: field(&os_release, "PRETTY_NAME", '=')
            .map(str::to_string)
            .unwrap_or_else(|| std::env::consts::OS.to_string()),
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        cpu_model: field(&cpuinfo, "model name", ':').unwrap_or("unknown").to_string(),
        logical_cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_gib: (mem_kib / (1024.0 * 1024.0) * 10.0).round() / 10.0,
        hostname: hostname(),
        gpus,
        gpu_driver,
    }
}

/// The commit of the git checkout holding `file`, `+dirty` appended where
/// its tracked files have changes; `None` outside a checkout, or where git
/// is not installed.
pub fn checkout_commit(file: &std::path::Path) -> Option<String> {
    let dir = std::path::absolute(file).ok()?.parent()?.to_path_buf();
    let git = |args: &[&str]| -> Option<String> {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&dir)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let head = git(&["rev-parse", "--verify", "HEAD"])?;
    if !(head.len() >= 40 && head.chars().all(|c| c.is_ascii_hexdigit())) {
        return None;
    }
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}+dirty") } else { head })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job's cgroup (v2) of 8 GiB inside a slice of 6 GiB, beside v1's
    /// "no limit" and a controller that is not memory's.
    #[test]
    fn the_lowest_cgroup_limit_up_the_tree_is_the_budget() {
        let files = |path: &str| -> Option<String> {
            match path {
                "/sys/fs/cgroup/job.slice/job-7/memory.max" => Some("8589934592\n".into()),
                "/sys/fs/cgroup/job.slice/memory.max" => Some("6442450944\n".into()),
                "/sys/fs/cgroup/memory.max" => Some("max\n".into()),
                "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes" => {
                    Some("9223372036854771712".into())
                }
                _ => None,
            }
        };
        assert_eq!(cgroup_limit("0::/job.slice/job-7\n", &files), Some(6 << 30));
        assert_eq!(cgroup_limit("4:memory:/docker/abc\n3:cpu:/job.slice\n0::/\n", &files), None);
        assert_eq!(cgroup_limit("", &files), None);
        assert_eq!(
            cgroup_limit("0::/../job.slice/job-7\n", &files),
            None,
            "outside the tree: the root alone"
        );
        // Docker on v1: the host's path, the container's limit at its own root.
        let docker =
            |path: &str| (path == "/sys/fs/cgroup/memory/memory.limit_in_bytes").then(|| "2147483648".into());
        assert_eq!(cgroup_limit("4:memory:/docker/0123abcd\n", &docker), Some(2 << 30));
        let v1 = |path: &str| {
            (path == "/sys/fs/cgroup/memory/k8s/pod/memory.limit_in_bytes").then(|| "1073741824".into())
        };
        assert_eq!(cgroup_limit("11:cpuset,memory:/k8s/pod\n", &v1), Some(1 << 30));
    }
}
