//! Energy a cell used: the GPUs' NVML power integrated over the cell, or
//! the CPU packages' RAPL counters, and why there is no figure where there
//! is none.

use serde::{Deserialize, Serialize};

/// What a cell's training and evaluation cost in energy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct EnergyReport {
    /// Joules over the cell's training and evaluation.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub joules: f64,
    /// `joules` over `images`.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub joules_per_image: f64,
    /// The images (warm-up included) the processes on the meter trained.
    #[serde(default)]
    pub images: usize,
    /// The ranks whose processes the meter covered and whose images
    /// `images` counts: a RAPL meter covers every process on its machine,
    /// NVML only the process's own GPUs. Empty for a single process.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_by: Vec<usize>,
    /// `joules` over the epochs run.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub joules_per_epoch: f64,
    /// Where the figure comes from: `nvml` (GPU board power, integrated),
    /// `rapl` (CPU package counters: the whole socket, other processes
    /// included) or `mock` (invented by `benchkit run --mock`).
    pub source: String,
    /// Why there is no figure, when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl EnergyReport {
    /// `joules` measured by `source` while the processes of ranks
    /// `shared_by` (none: a single process) trained `images` in `epochs`.
    pub fn measured(source: &str, joules: f64, images: usize, epochs: usize, shared_by: Vec<usize>) -> Self {
        let per = |n: usize| if n > 0 { joules / n as f64 } else { f64::NAN };
        Self {
            joules,
            joules_per_image: per(images),
            joules_per_epoch: per(epochs),
            images,
            shared_by,
            source: source.into(),
            unavailable: None,
        }
    }

    /// No figure, and why.
    pub fn unavailable(why: impl Into<String>) -> Self {
        Self {
            joules: f64::NAN,
            joules_per_image: f64::NAN,
            joules_per_epoch: f64::NAN,
            images: 0,
            shared_by: Vec::new(),
            source: "-".into(),
            unavailable: Some(why.into()),
        }
    }
}
