//! Measurement: timing statistics and the environment of a run.

pub mod env;
pub mod stats;

pub use env::Environment;
pub use stats::{modified_z, welch_p, Spread, Summary, NOISY_PCT, OUTLIER_Z};
