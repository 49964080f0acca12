//! Facts about the machine and build that every result carries.

use serde::Serialize;

/// Where and with what a run was measured.
#[derive(Clone, Debug, Serialize)]
pub struct Environment {
    pub benchkit_version: &'static str,
    pub git_commit: &'static str,
    pub burn_version: &'static str,
    pub wasmtime_version: &'static str,
    pub plugin_contract: &'static str,
    pub os: String,
    pub kernel: String,
    pub cpu_model: String,
    pub logical_cores: usize,
    pub memory_gib: f64,
    pub hostname: String,
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

impl Environment {
    /// Read the environment of this process.
    pub fn detect() -> Self {
        let cpuinfo = read("/proc/cpuinfo");
        let meminfo = read("/proc/meminfo");
        let os_release = read("/etc/os-release");
        let mem_kib: f64 = field(&meminfo, "MemTotal", ':')
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0);
        Self {
            benchkit_version: env!("CARGO_PKG_VERSION"),
            git_commit: env!("BENCHKIT_GIT_COMMIT"),
            burn_version: env!("BENCHKIT_BURN_VERSION"),
            wasmtime_version: env!("BENCHKIT_WASMTIME_VERSION"),
            plugin_contract: crate::plugin::CONTRACT_VERSION,
            os: field(&os_release, "PRETTY_NAME", '=')
                .map(str::to_string)
                .unwrap_or_else(|| std::env::consts::OS.to_string()),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            cpu_model: field(&cpuinfo, "model name", ':').unwrap_or("unknown").to_string(),
            logical_cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_gib: (mem_kib / (1024.0 * 1024.0) * 10.0).round() / 10.0,
            hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
        }
    }
}
