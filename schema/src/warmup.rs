//! A cell's warm-up: the steps left out of the statistics, why they ended,
//! and what a JIT backend's cubecl compiled and tuned in them.

use serde::{Deserialize, Serialize};

/// The steps excluded from the statistics, against the steady state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Warmup {
    pub steps: usize,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub mean_step_ms: f64,
    /// Mean warm-up step time over mean measured step time.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub slowdown: f64,
    /// Why warm-up ended; absent in results of schemas before 2.5.0, whose
    /// warm-up was always the configured count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<WarmupEnd>,
    /// The first training step's milliseconds, data wait included: on a JIT
    /// backend, what compiling and tuning its kernels cost before anything trained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_step_ms: Option<f64>,
    /// What warm-up cost beyond steady steps, in seconds: Σ over the warm-up
    /// steps of max(0, step − the measured steps' median step). On a JIT
    /// backend, its compiling and tuning (the Figures page's "compile s").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excess_s: Option<f64>,
}

/// Why a cell's warm-up ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum WarmupEnd {
    /// After the configured `warmup_steps`.
    Fixed,
    /// The steps were steady by the stated rule (`train.steady_*`).
    Steady,
    /// The rule never held within `train.max_warmup_steps`: measured from there.
    Limit,
    /// Training ended before the steps were steady: nothing was measured.
    RanOut,
}

impl WarmupEnd {
    /// How tables and notes say it.
    pub fn label(self) -> &'static str {
        match self {
            WarmupEnd::Fixed => "fixed",
            WarmupEnd::Steady => "steady",
            WarmupEnd::Limit => "limit",
            WarmupEnd::RanOut => "ran out",
        }
    }
}

/// What cubecl compiled and tuned for a JIT backend of burn's (`wgpu`, `cuda`)
/// in a cell, counted from the entries cubecl appended to its kernel cache
/// (with several processes on one machine sharing it, theirs too).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct JitReport {
    /// "cubecl-wgpu" or "cubecl-cuda".
    pub engine: String,
    /// The device as the engine's API names it, with its driver.
    pub device: String,
    /// "cold" (nothing kept for this engine, device and version) or "warm".
    pub cache: String,
    /// The cache folder's name under benchkit's kernel cache.
    pub cache_key: String,
    /// Cache files discarded before the cell as untrustworthy, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub discarded: Vec<String>,
    /// Kernels compiled and tuning runs finished during warm-up.
    pub warmup_compiled: u64,
    pub warmup_tuned: u64,
    /// The same during the measured steps: 0 unless warm-up ended early.
    pub measured_compiled: u64,
    pub measured_tuned: u64,
}
