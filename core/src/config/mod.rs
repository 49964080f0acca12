//! Config files: TOML in, a validated [`Plan`] out. Raw serde structs reject
//! unknown keys ([`raw`]); one pass turns them into the plan, and every error
//! names the file, line, key and what would be accepted. Nothing here opens
//! data, loads a plugin or trains; nothing downstream re-checks the plan.

mod address;
mod error;
mod launcher;
mod link;
mod matrix;
mod plan;
mod raw;
#[cfg(test)]
mod reference;
mod retired;
pub mod sample_data;
mod study;
#[cfg(test)]
mod tests;
mod validate;

pub use address::HostPort;
pub use error::ConfigError;
pub use launcher::{first_host, LaunchEnv, LaunchEnvError, Read, DEFAULT_COORDINATOR_PORT};
pub use link::LinkRate;
pub use matrix::{slug, Axis, Cell, Sweep};
pub use plan::{
    AllReduce, Balance, BatchSearch, Checkpoint, CollectiveKind, DataPlan, Faults, Launch, LrScaling,
    LrSchedule, Mode, Parallel, Plan, PluginPlan, StagedPipeline, Steady, Timing, TrainPlan, WarmupRule,
};
pub use study::{Check, Make, Prepare, Study, METRICS};
pub use validate::ranges::within_ranges;
pub(crate) use validate::unavailable;
