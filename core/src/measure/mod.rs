//! Measurement: GPU telemetry, energy, peak memory and the environment of a run. The statistics
//! live with the results they describe, in `benchkit_schema`. Probes here
//! must never fail a run: what cannot be read is reported as unavailable.

pub mod cpu;
pub mod energy;
pub mod env;
pub mod gpu;
pub mod memory;

pub use benchkit_schema::stats::{self, modified_z, welch_p, Spread, Summary, NOISY_PCT, OUTLIER_Z};
pub use env::Environment;
pub use gpu::{GpuReport, GpuSampler};
