//! Training: the step loop, its optimizer and schedule, and the records it
//! keeps. Generic over the burn backend; `dispatch` picks the concrete one
//! for a cell's backend, and [`pytorch`] runs a PyTorch row instead.
//! Nothing here reads configs, opens data or writes results: a cell arrives
//! as a [`CellJob`] and leaves as a [`TrainOutcome`].

pub mod collective;
pub mod detect;
mod dispatch;
mod error;
mod fence;
#[cfg_attr(not(any(feature = "wgpu", feature = "cuda")), allow(dead_code))]
mod jit;
mod loader_only;
pub mod lr_schedule;
mod packing;
mod phases;
mod pipeline;
pub mod pytorch;
mod rank_figures;
mod records;
mod replicas;
mod sgd;
mod step_loop;
mod task;
pub mod timeline;
pub mod warmup;

pub use detect::Hits;
pub use dispatch::{size_global_pool, train_cell};
pub use error::TrainError;
pub use fence::exposed_s;
pub use loader_only::loader_only;
pub use records::{
    headline, machine_tag, phase_sums, plain_step_s, training_windows, EpochRecord, RankFigures, StepRecord,
    TrainOutcome,
};
pub use replicas::World;
pub use step_loop::{train, CellJob};
pub use task::Task;
