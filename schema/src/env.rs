//! Where and with what a run was measured, as every run records it.

use serde::{Deserialize, Serialize};

/// Where and with what a run was measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Environment {
    pub benchkit_version: String,
    pub git_commit: String,
    pub burn_version: String,
    pub wasmtime_version: String,
    pub plugin_contract: String,
    pub os: String,
    pub kernel: String,
    pub cpu_model: String,
    pub logical_cores: usize,
    pub memory_gib: f64,
    pub hostname: String,
    /// NVIDIA GPUs the driver reports, by model name.
    pub gpus: Vec<String>,
    pub gpu_driver: Option<String>,
}
