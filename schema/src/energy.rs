//! Energy a cell used: the GPUs' NVML power integrated over the cell, or
//! the CPU packages' RAPL counters, and why there is no figure where there
//! is none.

use serde::{Deserialize, Serialize};

/// What a cell's training and evaluation cost in energy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnergyReport {
    /// Joules over the cell's training and evaluation.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub joules: f64,
    /// `joules` over the images trained on (warm-up included).
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub joules_per_image: f64,
    /// `joules` over the epochs run.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub joules_per_epoch: f64,
    /// Where the figure comes from: `nvml` (GPU board power, integrated) or
    /// `rapl` (CPU package counters: the whole socket, other processes included).
    pub source: String,
    /// Why there is no figure, when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl EnergyReport {
    /// `joules` measured by `source` over `images` trained in `epochs`.
    pub fn measured(source: &str, joules: f64, images: usize, epochs: usize) -> Self {
        let per = |n: usize| if n > 0 { joules / n as f64 } else { f64::NAN };
        Self {
            joules,
            joules_per_image: per(images),
            joules_per_epoch: per(epochs),
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
            source: "-".into(),
            unavailable: Some(why.into()),
        }
    }
}
