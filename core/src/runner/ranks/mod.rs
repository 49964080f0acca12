//! The processes of a multi-process cell, and of `benchkit collective`:
//! - [`launch`]: where each process stands (rank, coordinator, data port);
//! - [`local`]: the one starter of ranks on this machine, with the emulated
//!   network between them;
//! - [`rendezvous`]: where the ranks of an external launch first meet;
//! - [`peers`]: those ranks watching each other for the whole run.

pub mod launch;
pub mod local;
pub mod peers;
pub mod rendezvous;
pub mod throttle;

pub use local::{stop, wait_all, Ended, LocalRanks, Placement};
