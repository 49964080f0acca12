//! Facts about the machine and build that every result carries.

pub use benchkit_schema::Environment;

/// Now, in milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
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
