//! Measurement: timing statistics, GPU telemetry and the environment of a run.

pub mod env;
pub mod gpu;
pub mod stats;

pub use env::Environment;
pub use gpu::{GpuReport, GpuSampler};
pub use stats::{modified_z, welch_p, Spread, Summary, NOISY_PCT, OUTLIER_Z};
