//! Training: the step loop, its optimizer and schedule, and the records it
//! keeps. Generic over the burn backend; `dispatch` picks the concrete one
//! for a cell's backend, and [`pytorch`] runs a PyTorch row instead.
//! Nothing here reads configs, opens data or writes results: a cell arrives
//! as a [`CellJob`] and leaves as a [`TrainOutcome`].
//!
//! By job, each using only those listed before it (`error` is used by all,
//! `testing` by the tests of `pipeline` and `replicas`):
//! - `records`: what steps and epochs leave, the clocks that time them
//!   (`phases`, `fence`), and every rank's figures and timeline gathered;
//! - `optim`: SGD and the learning-rate schedule;
//! - `detect`, then `task`: how a batch becomes a loss and a score;
//! - `collective`: the processes of a cell and the all-reduce between them;
//! - `pipeline`, then `replicas`: where the model is placed (a pipeline of
//!   stages, or one replica or several);
//! - `step_loop`: the loop itself and when its warm-up ends;
//! - `dispatch`: a cell's backend as a concrete burn backend, with the JIT
//!   backends' kernel caches around it;
//! - `loader_only`, `pytorch`: a cell with the step taken out, and a
//!   PyTorch row.

pub mod collective;
pub mod detect;
mod dispatch;
mod error;
mod loader_only;
mod op_check;
pub mod optim;
mod pipeline;
pub mod pytorch;
mod records;
mod replicas;
mod step_loop;
mod task;
#[cfg(test)]
mod testing;

pub use collective::World;
pub use detect::Hits;
pub use dispatch::{size_global_pool, train_cell};
pub use error::TrainError;
pub use loader_only::loader_only;
pub use records::{
    exposed_s, headline, machine_tag, phase_sums, plain_step_s, training_windows, EpochRecord, RankFigures,
    StepRecord, TrainOutcome,
};
pub use step_loop::{train, CellJob};
pub use task::Task;
